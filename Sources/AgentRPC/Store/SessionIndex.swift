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

/// One stored session as the index keeps it: what `session/list` shows, and
/// the journal's length and modification time it was read from.
struct IndexedSession: Sendable, Equatable {
    var summary: StoredSessionSummary
    var journalLength: Int
    /// Nanoseconds since 1970.
    var journalModified: Int64

    var position: ListPosition { ListPosition(updatedAt: summary.updatedAt, sessionID: summary.sessionID) }
}

/// What `session/list` narrows a page to.
struct StoredSessionFilter: Sendable {
    /// A case-insensitive substring of the title.
    var query: String?
    /// The model name, exactly.
    var model: String?
    /// Only sessions updated after this.
    var updatedAfter: Date?

    var isEmpty: Bool { query == nil && model == nil && updatedAfter == nil }

    init(query: String? = nil, model: String? = nil, updatedAfter: Date? = nil) {
        self.query = query
        self.model = model
        self.updatedAfter = updatedAfter
    }

    /// From `session/list` params: a too long `query` or a time that is not
    /// RFC 3339 is `invalidParams`.
    init(_ params: SessionListParams) throws {
        if let q = params.query, q.count > SessionListParams.maxQueryLength {
            throw RPCError.invalidParams("query is longer than \(SessionListParams.maxQueryLength) characters", field: "query")
        }
        self.query = params.query.flatMap { $0.isEmpty ? nil : $0 }
        self.model = params.model
        if let text = params.updatedAfter {
            guard let date = Self.parseTime(text) else {
                throw RPCError.invalidParams("'\(text.prefix(64))' is not an RFC 3339 time (e.g. 2026-01-31T12:00:00Z)", field: "updatedAfter")
            }
            self.updatedAfter = date
        }
    }

    static func parseTime(_ text: String) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        // What ISO8601DateFormatter (ICU's parser) accepted before: leading spaces
        // skipped, no leap second, the fraction cut to whole milliseconds.
        let trimmed = text.drop { $0 == " " }
        if let seconds = trimmed.split(separator: "T", maxSplits: 1).dropFirst().first?.dropFirst(6).prefix(2), seconds == "60" { return nil }
        let parsed = (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(String(trimmed)))
            ?? (try? Date.ISO8601FormatStyle().parse(String(trimmed)))
        return parsed.map { JournalCodec.date(millis: JournalCodec.millis($0)) }
    }

    /// Whether `date` is after `updatedAfter`, in whole milliseconds (what the
    /// journal records and `updatedAt` shows).
    func isRecentEnough(_ date: Date) -> Bool {
        guard let updatedAfter else { return true }
        return Self.wholeMillis(date) > Self.wholeMillis(updatedAfter)
    }

    static func wholeMillis(_ date: Date) -> Int64 { Int64(JournalCodec.millis(date)) }

    func matches(title: String?, model sessionModel: String?) -> Bool {
        if let model, sessionModel != model { return false }
        if let query, !query.isEmpty {
            guard let title, TitleSearch.contains(title, query) else { return false }
        }
        return true
    }
}

/// The summaries of every stored session, in `session/list` order, kept by the
/// store in `<store>/.index` so a page costs the same with 100 or 100,000
/// stored sessions (docs/protocol.md, "Durable sessions").
///
/// The file is a log: a header line, then one JSON line per summary written
/// (the last line of an id wins; `deleted` removes it). Every process that
/// writes journals appends to it when a session syncs (at most once a second
/// each) and when one is unloaded, created or deleted; every process reads what
/// others appended since its last look before it answers a page. It is a
/// cache, never trusted over a journal: each session a page shows is checked
/// against its journal's length and modification time (one `stat`) and read
/// from the journal when they differ; at the first use in a process, and
/// whenever the file was replaced, truncated or deleted behind its back, every
/// journal is checked that way (a directory listing and one `stat` each) and
/// the ones that changed are read again. A missing index is rebuilt from all
/// journals. Appends take a shared `flock` on the file, the rewrite that
/// compacts it an exclusive one; the rewrite goes to a temporary file renamed
/// over the index.
final class SessionIndex: Sendable {
    static let fileName = ".index"
    static let formatVersion = 1

    private struct State {
        var entries: [String: IndexedSession] = [:]
        /// Sorted in `session/list` order (newest first).
        var order: [ListPosition] = []
        /// Whether the file was read and every journal checked in this process.
        var ready = false
        /// How much of the file was read, and which file (device, inode).
        var offset = 0
        var file: (dev: UInt64, ino: UInt64)?
        /// Lines in the file: compaction when far more than entries.
        var lines = 0
    }

    private let directory: String
    private let path: String
    private let logger: Logger
    private let state = Mutex(State())
    /// The descriptor appends go through. Apart from `state`, so a session's
    /// sync never waits for a long refresh (what it appends is read back by the
    /// next one). Taken after `state` when both are needed.
    private let appender = Mutex<Int32?>(nil)
    /// Reads one journal's summary (the store's; a journal that does not load is nil).
    private let readJournal: @Sendable (String) -> IndexedSession?

    init(directory: String, logger: Logger, readJournal: @escaping @Sendable (String) -> IndexedSession?) {
        self.directory = directory
        self.path = directory + "/" + Self.fileName
        self.logger = logger
        self.readJournal = readJournal
    }

    deinit {
        appender.withLock { fd in
            if let open = fd { close(open) }
        }
    }

    // MARK: Reading

    /// Brings the in-memory index up to date: the first time (or after the file
    /// was replaced, truncated or deleted) by reading it and checking every
    /// journal, else by reading what was appended since.
    func refresh() {
        state.withLock { s in refreshLocked(&s) }
    }

    private func refreshLocked(_ s: inout State) {
        var info = stat()
        let exists = stat(path, &info) == 0
        if s.ready, exists, let file = s.file, file.dev == UInt64(info.st_dev), file.ino == UInt64(info.st_ino), Int(info.st_size) >= s.offset {
            if Int(info.st_size) > s.offset { readTail(&s) }
            if s.lines > 2 * s.entries.count + 1000 { rewriteLocked(&s) }
            return
        }
        let started = Dispatching.monotonicNanoseconds()
        s.entries = [:]
        s.offset = 0
        s.lines = 0
        s.file = nil
        if exists { readTail(&s) }
        let changed = reconcile(&s)
        s.order = s.entries.values.map(\.position).sorted()
        s.ready = true
        if !exists || changed > 0 && changed * 4 > s.entries.count {
            rewriteLocked(&s)
        }
        let ms = Double(Dispatching.monotonicNanoseconds() - started) / 1e6
        logger.debug("session index: \(s.entries.count) sessions, \(changed) read from their journals, in \(String(cFormat: "%.1f", ms)) ms")
    }

    /// Applies the file's lines from `offset` on (complete lines only).
    private func readTail(_ s: inout State) {
        // O_NONBLOCK: a FIFO put where the index is must not block the open (a regular file reads as without it).
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { return }
        let fileID = (dev: UInt64(info.st_dev), ino: UInt64(info.st_ino))
        if let known = s.file, known != fileID {
            s.offset = 0
        }
        s.file = fileID
        let size = Int(info.st_size)
        guard size > s.offset else { return }
        let count = size - s.offset
        var bytes = [UInt8](repeating: 0, count: count)
        var got = 0
        while got < count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + got, count - got, off_t(s.offset + got)) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            got += n
        }
        var start = 0
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            while start < got, let found = memchr(base + start, 0x0A, got - start) {
                let end = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                apply(line: buffer[start..<end], to: &s, isFirstLine: s.offset == 0 && start == 0)
                s.lines += 1
                start = end + 1
            }
        }
        s.offset += start
    }

    private func apply(line: Slice<UnsafeBufferPointer<UInt8>>, to s: inout State, isFirstLine: Bool) {
        guard let value = try? JSONValue.parse(line) else { return }
        if isFirstLine, value["type"]?.stringValue == "index" { return }
        guard let id = value["id"]?.stringValue, SessionIDRule.isPlain(id) else { return }
        if value["deleted"]?.boolValue == true {
            removeLocked(id, &s)
            return
        }
        guard let entry = Self.decode(value, id: id) else { return }
        putLocked(entry, &s)
    }

    /// Checks every journal in the directory against its entry; reads the ones
    /// that differ or have none; drops entries without a journal. The count read.
    private func reconcile(_ s: inout State) -> Int {
        guard let dir = opendir(directory) else { return 0 }
        defer { closedir(dir) }
        let dirFD = dirfd(dir)
        var seen = Set<String>(minimumCapacity: s.entries.count)
        var changed = 0
        while let item = readdir(dir) {
            let name = withUnsafeBytes(of: item.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasSuffix(".jsonl") else { continue }
            let id = String(name.dropLast(6))
            guard SessionIDRule.isPlain(id) else { continue }
            var info = stat()
            guard fstatat(dirFD, name, &info, 0) == 0 else { continue }
            seen.insert(id)
            if let known = s.entries[id], known.journalLength == Int(info.st_size), known.journalModified == Self.nanos(info) { continue }
            changed += 1
            if let fresh = readJournal(id) {
                s.entries[id] = fresh
            } else {
                s.entries.removeValue(forKey: id)
            }
        }
        for id in s.entries.keys where !seen.contains(id) {
            s.entries.removeValue(forKey: id)
            changed += 1
        }
        return changed
    }

    // MARK: Pages

    /// Up to `count` stored sessions after `after` in list order that pass
    /// `filter` and are not `excluded`, each checked against its journal.
    func page(after: ListPosition?, count: Int, filter: StoredSessionFilter, excluded: (String) -> Bool) -> [IndexedSession] {
        for attempt in 0..<3 {
            let candidates = state.withLock { s -> [IndexedSession] in
                refreshLocked(&s)
                return collect(s, after: after, count: count, filter: filter, excluded: excluded)
            }
            // Never trusted over a journal: what differs is read again, which may move it.
            var moved = false
            for c in candidates where !isCurrent(c) {
                state.withLock { s in
                    if let fresh = readJournal(c.summary.sessionID) { updateLocked(fresh, &s) } else { forgetLocked(c.summary.sessionID, &s) }
                }
                moved = true
            }
            if !moved || attempt == 2 {
                return moved ? state.withLock { collect($0, after: after, count: count, filter: filter, excluded: excluded) } : candidates
            }
        }
        return []
    }

    private func collect(_ s: State, after: ListPosition?, count: Int, filter: StoredSessionFilter, excluded: (String) -> Bool) -> [IndexedSession] {
        var i = 0
        if let after {
            // The first position after the cursor in list order.
            var lo = 0
            var hi = s.order.count
            while lo < hi {
                let mid = (lo + hi) / 2
                if after < s.order[mid] { hi = mid } else { lo = mid + 1 }
            }
            i = lo
        }
        var out: [IndexedSession] = []
        while i < s.order.count, out.count < count {
            let position = s.order[i]
            i += 1
            if !filter.isRecentEnough(position.updatedAt) { break }
            guard !excluded(position.sessionID), let entry = s.entries[position.sessionID] else { continue }
            if !filter.isEmpty, !filter.matches(title: entry.summary.title, model: entry.summary.model) { continue }
            out.append(entry)
        }
        return out
    }

    /// Whether the journal is still the one the entry was read from.
    private func isCurrent(_ entry: IndexedSession) -> Bool {
        var info = stat()
        guard stat(directory + "/" + entry.summary.sessionID + ".jsonl", &info) == 0 else { return false }
        return Int(info.st_size) == entry.journalLength && Self.nanos(info) == entry.journalModified
    }

    /// Every stored session in list order (for `agentrpc sessions` and retention).
    func all() -> [IndexedSession] {
        state.withLock { s in
            refreshLocked(&s)
            return s.order.compactMap { s.entries[$0.sessionID] }
        }
    }

    func entry(_ id: String) -> IndexedSession? {
        state.withLock { s in
            refreshLocked(&s)
            return s.entries[id]
        }
    }

    var count: Int { state.withLock { $0.entries.count } }

    // MARK: Writing

    /// Records a session's new summary: a line appended to the file, which
    /// this process's next refresh reads back like another's.
    func update(_ entry: IndexedSession) {
        append(Self.encode(entry))
    }

    /// Records that a session is gone.
    func remove(_ id: String) {
        append(["id": .string(id), "deleted": true])
    }

    private func updateLocked(_ entry: IndexedSession, _ s: inout State) {
        if s.ready { putLocked(entry, &s) }
        append(Self.encode(entry))
    }

    private func forgetLocked(_ id: String, _ s: inout State) {
        if s.ready { removeLocked(id, &s) }
        append(["id": .string(id), "deleted": true])
    }

    private func putLocked(_ entry: IndexedSession, _ s: inout State) {
        let id = entry.summary.sessionID
        if let old = s.entries[id] {
            if old.position == entry.position {
                s.entries[id] = entry
                return
            }
            removeLocked(id, &s)
        }
        s.entries[id] = entry
        guard s.ready else { return }
        let p = entry.position
        s.order.insert(p, at: insertionIndex(p, s.order))
    }

    private func removeLocked(_ id: String, _ s: inout State) {
        guard let old = s.entries.removeValue(forKey: id), s.ready else { return }
        let p = old.position
        let i = insertionIndex(p, s.order)
        if i < s.order.count, s.order[i] == p { s.order.remove(at: i) }
    }

    /// The first index whose position is not before `p`.
    private func insertionIndex(_ p: ListPosition, _ order: [ListPosition]) -> Int {
        var lo = 0
        var hi = order.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if order[mid] < p { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// Appends one line under a shared `flock`, to the file now at the path.
    /// The index is a cache: a line that cannot be written is logged and the
    /// journal check catches up later.
    private func append(_ value: JSONValue) {
        var bytes = value.serialized()
        bytes.append(0x0A)
        appender.withLock { current in
            for _ in 0..<2 {
                guard let fd = appendDescriptor(&current) else { return }
                guard Self.lock(fd, LOCK_SH) else {
                    logger.debug("session index: a line was not written (the file stayed locked by another process)")
                    return
                }
                var held = stat()
                var now = stat()
                if fstat(fd, &held) != 0 || stat(path, &now) != 0 || held.st_ino != now.st_ino || held.st_dev != now.st_dev {
                    // Replaced (compacted elsewhere, or deleted): append to the file there now.
                    _ = flock(fd, LOCK_UN)
                    close(fd)
                    current = nil
                    continue
                }
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
                _ = flock(fd, LOCK_UN)
                if n != bytes.count {
                    if n > 0 { _ = ftruncate(fd, off_t(Int(held.st_size))) }
                    logger.debug("session index: a line was not written (errno \(errno))")
                }
                return
            }
        }
    }

    private func appendDescriptor(_ current: inout Int32?) -> Int32? {
        if let fd = current { return fd }
        var fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        if fd < 0 && errno == ENOENT {
            // A new file: say it does not list everything, so a reader checks the journals.
            fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { return nil }
            var header = Self.header(complete: false).serialized()
            header.append(0x0A)
            if Self.lock(fd, LOCK_EX) {
                var info = stat()
                if fstat(fd, &info) == 0, info.st_size == 0 { _ = header.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } }
                _ = flock(fd, LOCK_UN)
            }
        }
        guard fd >= 0 else { return nil }
        current = fd
        return fd
    }

    /// Writes every entry to a new file renamed over the index, under an
    /// exclusive `flock` on the old one (appends wait, then go to the new file).
    private func rewriteLocked(_ s: inout State) {
        guard replaceFile(&s) else { return }
        // Only once the old file's lock is released: an append takes `appender`
        // first and then that lock, so taking `appender` while holding the lock
        // could wait forever for an append that waits for us.
        appender.withLock { fd in
            if let open = fd { close(open) }
            fd = nil
        }
    }

    /// `rewriteLocked`'s file work; true when the new file took the index's place.
    private func replaceFile(_ s: inout State) -> Bool {
        let old = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        // Not rewritten now when another process keeps the file locked: the next refresh tries again.
        if old >= 0 && !Self.lock(old, LOCK_EX) {
            close(old)
            return false
        }
        defer {
            if old >= 0 {
                _ = flock(old, LOCK_UN)
                close(old)
            }
        }
        // What others appended meanwhile is kept.
        if old >= 0 { readTail(&s) }
        var bytes = Self.header(complete: true).serialized()
        bytes.append(0x0A)
        for p in s.order {
            guard let e = s.entries[p.sessionID] else { continue }
            Self.encode(e).serialize(into: &bytes)
            bytes.append(0x0A)
        }
        let temp = path + ".tmp-\(getpid())"
        let fd = open(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            written += n
        }
        close(fd)
        guard written == bytes.count, rename(temp, path) == 0 else {
            unlink(temp)
            return false
        }
        var info = stat()
        if stat(path, &info) == 0 {
            s.file = (UInt64(info.st_dev), UInt64(info.st_ino))
            s.offset = bytes.count
        }
        s.lines = s.entries.count + 1
        return true
    }

    /// The longest wait for the file's `flock`. Others hold it for one write, but a
    /// process stopped while holding it (a suspended `agentrpc chat` on the same
    /// store, say) would hold it for as long as it stays stopped: the index is a
    /// cache, so a line or a rewrite is given up instead of waited for.
    static let lockWaitSeconds = 0.5

    /// `flock(fd, operation)` within `lockWaitSeconds`; false when not had.
    static func lock(_ fd: Int32, _ operation: Int32) -> Bool {
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(lockWaitSeconds))
        while flock(fd, operation | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR, ContinuousClock.now < deadline else { return false }
            // Another process's lock ends with no event to wait on: 1 ms steps within the bound.
            usleep(1_000)
        }
        return true
    }

    // MARK: Lines

    private static func header(complete: Bool) -> JSONValue {
        ["type": "index", "format": .int(formatVersion), "complete": .bool(complete)]
    }

    static func encode(_ e: IndexedSession) -> JSONValue {
        let s = e.summary
        var o: [String: JSONValue] = [
            "id": .string(s.sessionID), "journalLength": .int(e.journalLength), "journalModified": .int(Int(e.journalModified)),
            "createdAt": .int(JournalCodec.millis(s.createdAt)), "updatedAt": .int(JournalCodec.millis(s.updatedAt)),
            "revision": .int(s.revision), "entryCount": .int(s.entryCount),
        ]
        if let t = s.title { o["title"] = .string(t) }
        if let u = s.userId { o["userId"] = .string(u) }
        if let m = s.model { o["model"] = .string(m) }
        return .object(o)
    }

    static func decode(_ v: JSONValue, id: String) -> IndexedSession? {
        guard let length = v["journalLength"]?.intValue, let modified = v["journalModified"]?.intValue,
            let created = v["createdAt"]?.intValue, let updated = v["updatedAt"]?.intValue,
            let revision = v["revision"]?.intValue, let count = v["entryCount"]?.intValue
        else { return nil }
        let summary = StoredSessionSummary(
            sessionID: id, title: v["title"]?.stringValue, userId: v["userId"]?.stringValue, model: v["model"]?.stringValue,
            createdAt: JournalCodec.date(millis: created), updatedAt: JournalCodec.date(millis: updated),
            revision: revision, entryCount: count, lockedBy: nil, locked: false)
        return IndexedSession(summary: summary, journalLength: length, journalModified: Int64(modified))
    }

    static func nanos(_ info: stat) -> Int64 {
        #if canImport(Darwin)
        return Int64(info.st_mtimespec.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtimespec.tv_nsec)
        #else
        return Int64(info.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(info.st_mtim.tv_nsec)
        #endif
    }
}
