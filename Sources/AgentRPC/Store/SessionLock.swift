import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// This process's claim on a store directory: one file, `.owner-<pid>-<nonce>`,
/// on which the process holds an exclusive `flock` for as long as it lives. It
/// is the only descriptor the locks of loaded sessions cost, however many are
/// loaded: a session's `<id>.lock` file names the owner that has it loaded
/// (`<pid> <nonce>`), and a session is locked exactly while that owner's file
/// is locked. The kernel drops the `flock` when the process dies, so a crash
/// leaves no stale lock; the nonce keeps a reused pid from looking alive.
final class StoreOwner: Sendable {
    let token: String
    let path: String
    private let fd: Int32

    private init(token: String, path: String, fd: Int32) {
        self.token = token
        self.path = path
        self.fd = fd
    }

    static let prefix = ".owner-"

    /// The owner file's name part for `token` (`<pid> <nonce>` → `<pid>-<nonce>`).
    /// Not `replacingOccurrences`: that goes through `NSString`, whose first use
    /// cost about 0.2 ms of the first resume of a process.
    private static func fileName(_ token: String) -> String {
        String(token.map { $0 == " " ? "-" : $0 })
    }

    /// The file is locked under a temporary name and then renamed into place, so
    /// `removeStale` never sees an owner file that is not locked yet.
    static func create(directory: String) throws -> StoreOwner {
        let token = "\(getpid()) \(UInt64.random(in: 1...UInt64.max))"
        let name = prefix + fileName(token)
        let path = directory + "/" + name
        let temp = directory + "/.tmp" + name
        let fd = open(temp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.posix("cannot create the owner file \(temp)") }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, rename(temp, path) == 0 else {
            let error = StoreError.posix("cannot lock the owner file \(path)")
            close(fd)
            unlink(temp)
            throw error
        }
        return StoreOwner(token: token, path: path, fd: fd)
    }

    /// Whether the owner `token` names (`<pid> <nonce>`) is a live process: its
    /// owner file exists and is locked.
    static func isAlive(token: String, directory: String) -> Bool {
        let name = prefix + fileName(token)
        guard SessionIDRule.isPlain(String(name.dropFirst(prefix.count))) else { return false }
        // O_NONBLOCK here and below: a FIFO under a store file's name must not
        // block the open; a regular file and its flock are the same with it.
        let fd = open(directory + "/" + name, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            _ = flock(fd, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// Removes the owner files of processes that are gone (best effort).
    static func removeStale(directory: String, except own: String?) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names where name.hasPrefix(prefix) {
            let path = directory + "/" + name
            if path == own { continue }
            let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { continue }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 { unlink(path) }
            close(fd)
        }
    }

    deinit {
        unlink(path)
        close(fd)
    }
}

/// A loaded session's lock (docs/protocol.md, "Durable sessions"): the
/// session's `<id>.lock` file names this process's `StoreOwner`. It holds no
/// descriptor: the file is opened, `flock`ed and closed again only while it is
/// claimed, released or probed, so two claims never interleave.
final class SessionLock: Sendable {
    private let path: String
    private let token: String

    private init(path: String, token: String) {
        self.path = path
        self.token = token
    }

    /// Claims the session for `owner`, or throws `sessionLocked` when a live
    /// process (this one included) has it.
    static func acquire(path: String, sessionID: String, owner: StoreOwner, directory: String) throws -> SessionLock {
        try withFileLocked(path, sessionID: sessionID) { fd in
            let holder = readToken(fd)
            if let holder, !holder.isEmpty, holder == owner.token || StoreOwner.isAlive(token: holder, directory: directory) {
                throw locked(sessionID, pid: pid(of: holder))
            }
            let bytes = Array((owner.token + "\n").utf8)
            guard ftruncate(fd, 0) == 0, bytes.withUnsafeBytes({ pwrite(fd, $0.baseAddress, $0.count, 0) }) == bytes.count else {
                throw StoreError.posix("cannot write the lock file \(path)")
            }
        }
        return SessionLock(path: path, token: owner.token)
    }

    /// Whether a live process other than `owner`'s holds the lock, and its pid.
    /// `owner` nil: any live holder counts (a process that loads nothing).
    static func probe(path: String, directory: String, owner: StoreOwner?) -> (locked: Bool, pid: Int32?) {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return (false, nil) }
        defer { close(fd) }
        // An exclusive flock held for long is an older agentrpc that keeps it while loaded.
        if flock(fd, LOCK_SH | LOCK_NB) != 0 {
            return (true, readToken(fd).flatMap(pid(of:)))
        }
        let holder = readToken(fd)
        _ = flock(fd, LOCK_UN)
        guard let holder, !holder.isEmpty else { return (false, nil) }
        if holder == owner?.token { return (true, pid(of: holder)) }
        return StoreOwner.isAlive(token: holder, directory: directory) ? (true, pid(of: holder)) : (false, nil)
    }

    /// Empties the lock file if it still names this claim.
    func release() {
        let token = self.token
        try? Self.withFileLocked(path, sessionID: "", create: false) { fd in
            if Self.readToken(fd) == token { _ = ftruncate(fd, 0) }
        }
    }

    /// Runs `body` with `path` open and exclusively `flock`ed. Another process
    /// holds that `flock` only for an instant (or, an older agentrpc, while the
    /// session is loaded): a few tries, then `sessionLocked`.
    private static func withFileLocked(_ path: String, sessionID: String, create: Bool = true, _ body: (Int32) throws -> Void) throws {
        for _ in 0..<4 {
            let fd = open(path, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0), 0o600)
            guard fd >= 0 else {
                if !create && errno == ENOENT { return }
                throw StoreError.posix("cannot open the lock file \(path)")
            }
            defer { close(fd) }
            var attempts = 0
            while flock(fd, LOCK_EX | LOCK_NB) != 0 {
                let code = errno
                attempts += 1
                if code == EWOULDBLOCK && attempts < 4 {
                    usleep(2_000)
                    continue
                }
                if code == EWOULDBLOCK { throw locked(sessionID, pid: readToken(fd).flatMap(pid(of:))) }
                throw StoreError.posix("cannot lock \(path)")
            }
            // A delete may have removed the file between open and flock: lock the one at the path.
            var held = stat()
            var current = stat()
            guard fstat(fd, &held) == 0, stat(path, &current) == 0, held.st_ino == current.st_ino, held.st_dev == current.st_dev else {
                if !create { return }
                continue
            }
            defer { _ = flock(fd, LOCK_UN) }
            try body(fd)
            return
        }
        throw locked(sessionID, pid: nil)
    }

    static func locked(_ sessionID: String, pid: Int32?) -> RPCError {
        var data: [String: JSONValue] = ["sessionId": .string(sessionID)]
        data["pid"] = pid.map { .int(Int($0)) } ?? .null
        return RPCError(
            .sessionLocked, "session '\(sessionID)' is loaded by another agentrpc process" + (pid.map { " (pid \($0))" } ?? ""), data: data)
    }

    private static func readToken(_ fd: Int32) -> String? {
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard n >= 0 else { return nil }
        return String(decoding: buffer[..<n], as: UTF8.self).trimmingWhitespaceAndNewlines()
    }

    private static func pid(of token: String) -> Int32? {
        token.split(separator: " ").first.flatMap { Int32($0) }
    }
}
