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

/// The session store on disk (docs/protocol.md, "Durable sessions"): in one
/// directory (mode 0700), per session
///
/// - `<id>.jsonl`: the append-only journal (mode 0600),
/// - `<id>.lock`: what a loaded session holds an `flock` on, with the holder's
///   process id inside (a separate file because compaction replaces the journal
///   by rename, and a lock on the old file would not cover the new one),
/// - `<id>.summary`: what `session/list` shows, a cache rebuilt from the journal
///   whenever it is missing or older than the journal,
/// - `<id>.media/`: the images and audio its tools returned (`MediaStore`).
final class JournalStore: SessionStore {
    let directory: String
    let logger: Logger
    /// How often at most a loaded session rewrites its summary cache (nanoseconds):
    /// a write and a rename per turn cost more than the turn's fsync. It is always
    /// written when the session is unloaded, and a stale one is never shown:
    /// `session/list` in another process reads the journal instead (the cache
    /// names the journal length it describes).
    let summaryInterval: UInt64
    var location: String { directory }

    /// The summaries `session/list` pages through (see `SessionIndex`).
    let index: SessionIndex

    /// Journals being read now (see `SharedJournalReads`).
    let reads: SharedJournalReads
    /// The test hook that stops the process at a chosen journal write (nil: none).
    let killSwitch: TestKillSwitch?
    /// When this store was opened (seconds since 1970): a temporary file named
    /// with this process's pid but older is an earlier process's.
    private let openedAt = time(nil)

    init(directory: String, logger: Logger, summaryInterval: UInt64 = 1_000_000_000, killSwitch: TestKillSwitch? = nil) {
        self.directory = directory
        self.logger = logger
        self.killSwitch = killSwitch
        self.summaryInterval = summaryInterval
        let reads = SharedJournalReads()
        self.reads = reads
        self.index = SessionIndex(directory: directory, logger: logger) { id in
            JournalStore.indexedSummary(directory: directory, id: id, logger: logger, reads: reads)
        }
    }

    /// Made at the first claim of a session (a process that only lists needs none).
    private let ownerState = Mutex<StoreOwner?>(nil)

    /// This process's owner file in the store (see `StoreOwner`), created on first use.
    func owner() throws -> StoreOwner {
        try ownerState.withLock { state in
            if let existing = state { return existing }
            try prepareDirectory()
            let made = try StoreOwner.create(directory: directory)
            StoreOwner.removeStale(directory: directory, except: made.path)
            state = made
            return made
        }
    }

    var ownerIfAny: StoreOwner? { ownerState.withLock { $0 } }

    /// `$XDG_STATE_HOME/agentrpc/sessions`, else `~/.local/state/agentrpc/sessions`.
    static func defaultDirectory(environment: [String: String]) -> String {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") {
            return state + "/agentrpc/sessions"
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? Self.accountHome()
        return home + "/.local/state/agentrpc/sessions"
    }

    /// The home directory of the account the server runs as (when HOME is unset or empty).
    private static func accountHome() -> String {
        guard let entry = getpwuid(getuid()), let home = entry.pointee.pw_dir else { return "/" }
        return String(decoding: UnsafeRawBufferPointer(start: home, count: strlen(home)), as: UTF8.self)
    }

    func path(_ id: String, _ suffix: String) -> String { directory + "/" + id + suffix }

    func mediaDirectory(_ id: String) -> String { path(id, ".media") }

    /// Creates the directory (0700) when it is missing.
    func prepareDirectory() throws {
        var status = stat()
        if stat(directory, &status) == 0 && status.st_mode & S_IFMT == S_IFDIR { return }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StoreError.unavailable("cannot create the store directory \(directory): \(error.localizedDescriptionLikeFoundation)")
        }
    }

    // MARK: SessionStore

    func create(_ header: JournalHeader, config: SessionConfig, initial: TranscriptSnapshot?) throws -> any SessionJournal {
        try prepareDirectory()
        let lock = try SessionLock.acquire(path: path(header.sessionID, ".lock"), sessionID: header.sessionID, owner: try owner(), directory: directory)
        do {
            var bytes = JournalCodec.headerLine(header)
            if let initial {
                bytes += try JournalCodec.snapshotLine(Transcript(snapshot: initial), at: Date())
            }
            let journalPath = path(header.sessionID, ".jsonl")
            let fd = posixOpen(journalPath, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw StoreError.posix("cannot create \(journalPath)") }
            let journal = FileJournal(store: self, header: header, config: config, fd: fd, length: 0, lock: lock)
            defer { journal.releaseDescriptor() }
            do {
                try journal.appendRaw(bytes)
                try journal.fsyncFile()
                try fsyncDirectory()
            } catch {
                journal.close()
                unlink(journalPath)
                throw error
            }
            // Listed by other processes from now on, not only after the first sync.
            let transcript = initial.map(Transcript.init(snapshot:)) ?? Transcript(properties: config.properties ?? [:], createdAt: header.createdAt)
            writeSummary(Self.summary(of: header, config: config, transcript: transcript))
            return journal
        } catch {
            lock.release()
            throw error
        }
    }

    func open(_ id: String) throws -> (journal: any SessionJournal, contents: JournalContents) {
        let journalPath = path(id, ".jsonl")
        guard FileManager.default.fileExists(atPath: journalPath) else { throw RPCError.sessionNotFound(id) }
        let lock = try SessionLock.acquire(path: path(id, ".lock"), sessionID: id, owner: try owner(), directory: directory)
        do {
            var contents = try reads.load(journalPath).contents
            guard contents.header.sessionID == id else {
                throw RPCError(.journalUnreadable, "the journal \(journalPath) belongs to session '\(contents.header.sessionID)'", data: ["sessionId": .string(id)])
            }
            let journal = FileJournal(
                store: self, header: contents.header, config: contents.config, fd: nil, length: contents.fileLength, lock: lock,
                records: contents.recordsSinceSnapshot)
            defer { journal.releaseDescriptor() }
            if !contents.warnings.isEmpty {
                // Appending after a line that does not load would hide every later
                // change: keep the file as it was for the user, then start over from
                // what loaded.
                let keep = path(id, ".jsonl.corrupt-\(JournalCodec.millis(Date()))")
                if link(journalPath, keep) == 0 {
                    contents.warnings.append(JournalWarning(line: 0, message: "the journal as it was is kept in \(keep)"))
                }
                try journal.rewrite(contents.transcript)
            } else if contents.tornBytes > 0 {
                // A last line cut short by a crash was never announced: cut it off.
                try journal.truncate(to: contents.validLength)
            }
            contents.transcript.journal = journal
            return (journal, contents)
        } catch {
            lock.release()
            throw error
        }
    }

    func read(_ id: String) throws -> JournalContents {
        let journalPath = path(id, ".jsonl")
        guard FileManager.default.fileExists(atPath: journalPath) else { throw RPCError.sessionNotFound(id) }
        return try Self.loadFile(journalPath).contents
    }

    func page(after: ListPosition?, count: Int, filter: StoredSessionFilter, excluded: (String) -> Bool) -> [StoredSessionSummary] {
        index.page(after: after, count: count, filter: filter, excluded: excluded).map { withLockState($0.summary) }
    }

    func summary(_ id: String) throws -> StoredSessionSummary? {
        guard let entry = index.entry(id) else { return nil }
        var info = stat()
        guard stat(path(id, ".jsonl"), &info) == 0 else { return nil }
        if Int(info.st_size) == entry.journalLength && SessionIndex.nanos(info) == entry.journalModified {
            return withLockState(entry.summary)
        }
        // Never trusted over the journal.
        guard let fresh = Self.indexedSummary(directory: directory, id: id, logger: logger, reads: reads) else { return nil }
        index.update(fresh)
        return withLockState(fresh.summary)
    }

    /// The summary with whether another process has the session loaded.
    private func withLockState(_ summary: StoredSessionSummary) -> StoredSessionSummary {
        var s = summary
        let (locked, holder) = SessionLock.probe(path: path(s.sessionID, ".lock"), directory: directory, owner: ownerIfAny)
        s.locked = locked
        s.lockedBy = holder
        return s
    }

    /// A journal's summary as the index keeps it; nil when it does not load
    /// (logged: one bad journal must not break the listing of the others).
    static func indexedSummary(directory: String, id: String, logger: Logger, reads: SharedJournalReads) -> IndexedSession? {
        let journalPath = directory + "/" + id + ".jsonl"
        do {
            let (contents, info) = try reads.load(journalPath)
            let summary = summary(of: contents.header, config: contents.config, transcript: contents.transcript)
            return IndexedSession(summary: summary, journalLength: Int(info.st_size), journalModified: SessionIndex.nanos(info))
        } catch {
            logger.warning("session \(id): \(error)")
            return nil
        }
    }

    func delete(_ id: String) throws -> Bool {
        let journalPath = path(id, ".jsonl")
        guard FileManager.default.fileExists(atPath: journalPath) else { return false }
        let lock = try SessionLock.acquire(path: path(id, ".lock"), sessionID: id, owner: try owner(), directory: directory)
        defer { lock.release() }
        if unlink(journalPath) != 0 && errno != ENOENT { throw StoreError.posix("cannot remove \(journalPath)") }
        MediaStore.remove(directory: mediaDirectory(id))
        // Left by older versions.
        unlink(path(id, ".summary"))
        index.remove(id)
        unlink(path(id, ".lock"))
        try? fsyncDirectory()
        return true
    }

    // MARK: Leftovers

    /// A temporary file older than this (seconds) is never one being written.
    static let temporaryLifetime = 3600

    /// Removes the temporary files a crash can leave in the store: a snapshot
    /// or an import being written (`<id>.jsonl.tmp-<pid>`), the media an import
    /// was reading (the directory `.import-media.tmp-<pid>-<nonce>`), the index
    /// being rewritten (`.index.tmp-<pid>`), an owner file being made
    /// (`.tmp.owner-<pid>-<nonce>`). One is removed when its process is gone,
    /// when it has this process's pid but is older than this store (a pid
    /// reused, as a container's often is), or when it is older than an hour.
    /// Returns the names removed.
    @discardableResult
    func removeLeftoverTemporaries() -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        let now = time(nil)
        var removed: [String] = []
        for name in names {
            guard let pid = Self.temporaryOwnerPID(name) else { continue }
            var info = stat()
            let isStaging = name.hasPrefix(Self.importMediaPrefix)
            guard lstat(directory + "/" + name, &info) == 0, (info.st_mode & S_IFMT) == (isStaging ? S_IFDIR : S_IFREG) else { continue }
            let modified = time_t(SessionIndex.nanos(info) / 1_000_000_000)
            let leftover: Bool
            if now - modified > Self.temporaryLifetime {
                leftover = true
            } else if pid == getpid() {
                leftover = modified < openedAt
            } else {
                leftover = kill(pid, 0) != 0 && errno == ESRCH
            }
            guard leftover else { continue }
            if isStaging {
                MediaStore.remove(directory: directory + "/" + name)
                removed.append(name)
            } else if unlink(directory + "/" + name) == 0 {
                removed.append(name)
            }
        }
        if !removed.isEmpty { logger.info("store: removed \(removed.count) temporary file(s) left by a crash: \(removed.prefix(5).joined(separator: ", "))") }
        return removed
    }

    /// The pid a store temporary file is named with, or nil for any other name.
    static func temporaryOwnerPID(_ name: String) -> pid_t? {
        let digits: Substring
        if name.hasPrefix(".tmp" + StoreOwner.prefix) {
            digits = name.dropFirst(4 + StoreOwner.prefix.count).prefix { $0 != "-" }
        } else if name.hasPrefix(importMediaPrefix) {
            digits = name.dropFirst(importMediaPrefix.count).prefix { $0 != "-" }
        } else if let marker = name.ranges(of: ".tmp-").last, name.hasSuffix(".jsonl" + name[marker.lowerBound...]) || name.hasPrefix(SessionIndex.fileName + ".tmp-") {
            digits = name[marker.upperBound...]
        } else {
            return nil
        }
        guard !digits.isEmpty, digits.count <= 10, digits.allSatisfy(\.isASCII), digits.allSatisfy(\.isNumber), let pid = pid_t(digits), pid > 0 else { return nil }
        return pid
    }

    // MARK: For people and retention

    /// Drops this process's owner file (a command that is done with the store).
    func releaseOwner() {
        ownerState.withLock { $0 = nil }
    }

    /// What a prune removed, and what it left because another process has it loaded.
    struct PruneReport: Sendable {
        var removed: [String] = []
        var skipped: [(id: String, pid: Int32?)] = []
    }

    /// Removes the stored sessions last updated before `olderThan`, and those
    /// past the `keepNewest` most recently updated; never one `excluded` (loaded
    /// here) or loaded by another process (`skipped`). `dryRun` only reports.
    func prune(olderThan: Date?, keepNewest: Int?, dryRun: Bool, excluded: (String) -> Bool) -> PruneReport {
        var report = PruneReport()
        guard olderThan != nil || keepNewest != nil else { return report }
        for (rank, entry) in index.all().enumerated() {
            let s = entry.summary
            let tooOld = olderThan.map { s.updatedAt < $0 } ?? false
            let tooMany = keepNewest.map { rank >= $0 } ?? false
            guard tooOld || tooMany else { continue }
            if excluded(s.sessionID) {
                report.skipped.append((s.sessionID, getpid()))
                continue
            }
            if dryRun {
                let (locked, pid) = SessionLock.probe(path: path(s.sessionID, ".lock"), directory: directory, owner: ownerIfAny)
                if locked { report.skipped.append((s.sessionID, pid)) } else { report.removed.append(s.sessionID) }
                continue
            }
            do {
                if try delete(s.sessionID) { report.removed.append(s.sessionID) }
            } catch let error as RPCError where error.kind == .sessionLocked {
                report.skipped.append((s.sessionID, error.data["pid"]?.intValue.flatMap { Int32(exactly: $0) }))
            } catch {
                logger.warning("session \(s.sessionID): not pruned: \(error)")
            }
        }
        return report
    }

    /// A session as one self-contained JSONL, handed to `write` piece by
    /// piece: its first line, one snapshot of its state (read, not locked: a
    /// loaded session exports as last synced), and one media line per image or
    /// audio clip it names (`SessionExport`), read one at a time. Returns what
    /// it names that its store does not have (or has changed): not carried.
    func exportSession(_ id: String, write: ([UInt8]) throws -> Void) throws -> [MediaReference] {
        let contents = try read(id)
        try write(JournalCodec.headerLine(contents.header) + (try JournalCodec.snapshotLine(contents.transcript, at: Date())))
        let media = MediaStore(directory: mediaDirectory(id))
        var missing: [MediaReference] = []
        for reference in contents.transcript.mediaReferences {
            guard let bytes = media.bytes(of: reference), SHA256.hex(bytes) == reference.sha256 else {
                missing.append(reference)
                continue
            }
            try write(SessionExport.mediaLine(sha256: reference.sha256, bytes: bytes))
        }
        return missing
    }

    /// What an import stored: the session's id, and the media it names that
    /// the file did not carry (only with `allowMissingMedia`).
    struct Imported: Sendable {
        var id: String
        var media: Int
        var missing: [MediaReference]
    }

    /// Where an import keeps the media it reads before it knows the session's id.
    static let importMediaPrefix = ".import-media.tmp-"

    /// Loads an exported session (or any journal) into this store under its own
    /// id. It must load whole, its id must not be stored here yet, and each
    /// image or audio clip its entries name must be in the file (a media line
    /// whose SHA-256 matches), unless `allowMissingMedia` (the model then gets
    /// their notes). The media go beside the journal before it is stored.
    func importSession(from file: String, allowMissingMedia: Bool = false) throws -> Imported {
        try prepareDirectory()
        let staging = MediaStore(directory: directory + "/" + Self.importMediaPrefix + "\(getpid())-" + String(UInt32.random(in: 0...UInt32.max), radix: 16))
        guard let stagingPath = staging.directory else { throw StoreError.unavailable("no media directory") }
        var stagingKept = true
        defer { if stagingKept { MediaStore.remove(directory: stagingPath) } }
        let contents: JournalContents
        let carried: Set<String>
        do {
            let fd = posixOpen(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
            guard fd >= 0 else { throw JournalFileLines.ReadFailure(code: errno) }
            defer { posixClose(fd) }
            var info = stat()
            guard fstat(fd, &info) == 0 else { throw JournalFileLines.ReadFailure(code: errno) }
            guard info.st_mode & S_IFMT == S_IFREG else { throw RPCError(.journalUnreadable, "\(file) is not a regular file") }
            let size = max(Int(info.st_size), 0)
            var lines = SessionExport.Lines(JournalFileLines(fd: fd, expectedSize: size), media: staging)
            defer { lines.base.release() }
            contents = try JournalCodec.load(&lines, byteCount: size)
            carried = lines.kept
        } catch is JournalFileLines.ReadFailure {
            throw RPCError(.invalidParams, "cannot read \(file)")
        }
        if let warning = contents.warnings.first {
            throw RPCError(.journalUnreadable, "\(file) does not load whole: \(warning.message)")
        }
        let id = contents.header.sessionID
        try SessionIDRule.check(id)
        let missing = contents.transcript.mediaReferences.filter { !carried.contains($0.sha256) }
        if !missing.isEmpty && !allowMissingMedia {
            throw RPCError(.journalUnreadable, "\(file) does not carry the media its session names: " + ToolMedia.missingNote(missing)
                + ". It was exported without them (by an older agentrpc, or from a store that had lost them); --allow-missing-media imports it as it is", data: [
                    "missingMedia": .array(missing.map { .string($0.sha256) }),
                ])
        }
        let target = path(id, ".jsonl")
        if FileManager.default.fileExists(atPath: target) {
            throw RPCError(.invalidParams, "session '\(id)' is already in \(directory)")
        }
        let lock = try SessionLock.acquire(path: path(id, ".lock"), sessionID: id, owner: try owner(), directory: directory)
        defer { lock.release() }
        // Beside the journal before the journal is stored: a stored session never names media it lacks.
        let media = mediaDirectory(id)
        if !carried.isEmpty {
            // A directory left without its journal (a crash) belongs to no session.
            MediaStore.remove(directory: media)
            guard rename(stagingPath, media) == 0 else { throw StoreError.posix("cannot store \(media)") }
            stagingKept = false
            try fsyncDirectory()
        }
        do {
            try storeImportedJournal(contents, id: id, target: target)
        } catch {
            if !carried.isEmpty { MediaStore.remove(directory: media) }
            throw error
        }
        if let entry = Self.indexedSummary(directory: directory, id: id, logger: logger, reads: reads) { index.update(entry) }
        return Imported(id: id, media: carried.count, missing: missing)
    }

    private func storeImportedJournal(_ contents: JournalContents, id: String, target: String) throws {
        let normalized = JournalCodec.headerLine(contents.header) + (try JournalCodec.snapshotLine(contents.transcript, at: Date()))
        let temp = path(id, ".jsonl.tmp-\(getpid())")
        let fd = posixOpen(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.posix("cannot write \(temp)") }
        let written = normalized.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        let synced = fsync(fd) == 0
        posixClose(fd)
        defer { unlink(temp) }
        guard written == normalized.count, synced else { throw StoreError.posix("cannot write \(temp)") }
        // `link` never replaces: a session stored meanwhile under the same id wins.
        guard link(temp, target) == 0 else {
            if errno == EEXIST { throw RPCError(.invalidParams, "session '\(id)' is already in \(directory)") }
            throw StoreError.posix("cannot store \(target)")
        }
        try fsyncDirectory()
    }

    // MARK: Summaries

    static func summary(of header: JournalHeader, config: SessionConfig, transcript: Transcript) -> StoredSessionSummary {
        StoredSessionSummary(
            sessionID: header.sessionID, title: title(config: config, entries: transcript.entries), userId: config.userId,
            model: config.displayModel, createdAt: header.createdAt, updatedAt: transcript.updatedAt,
            revision: transcript.revision, entryCount: transcript.count, lockedBy: nil, locked: false)
    }

    /// The configured title, else the first prompt cut to 80 characters.
    static func title(config: SessionConfig, entries: [TranscriptEntry]) -> String? {
        if let title = config.title { return title }
        for entry in entries {
            if case .prompt(let text, _) = entry.content {
                let line = text.trimmingWhitespaceAndNewlines()
                return line.count > 80 ? String(line.prefix(80)) : line
            }
        }
        return nil
    }

    /// Records a loaded session's summary in the index, with the journal's
    /// length and modification time now.
    func writeSummary(_ summary: StoredSessionSummary) {
        // In whole milliseconds, as the journal records it: the same as a re-read would give.
        var s = summary
        s.updatedAt = JournalCodec.date(millis: JournalCodec.millis(summary.updatedAt))
        s.createdAt = JournalCodec.date(millis: JournalCodec.millis(summary.createdAt))
        var info = stat()
        guard stat(path(s.sessionID, ".jsonl"), &info) == 0 else { return }
        index.update(IndexedSession(summary: s, journalLength: Int(info.st_size), journalModified: SessionIndex.nanos(info)))
    }

    // MARK: Files

    /// Whether two `stat`s are of the same file with the same contents: same
    /// device and inode (a rewrite renames a new file over the journal), same
    /// length and modification time (every append changes both).
    static func sameFile(_ a: stat, _ b: stat) -> Bool {
        a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size && SessionIndex.nanos(a) == SessionIndex.nanos(b)
    }

    /// Loads the journal at `path`, read line by line (`JournalFileLines`),
    /// and its `stat` as it was opened. A file that cannot be opened or read
    /// throws `storeUnavailable` with the system's reason.
    static func loadFile(_ path: String) throws -> (contents: JournalContents, info: stat) {
        do { return try loadFileReportingReads(path) } catch let failure as JournalFileLines.ReadFailure {
            errno = failure.code
            throw StoreError.posix("cannot read \(path)")
        }
    }

    /// `loadFile`, with a failed `open`, `fstat` or `read` thrown as the `ReadFailure` it is.
    /// Anything but a regular file is `journalUnreadable`: a FIFO would block
    /// the open (and a `session/list` waiting for the index check) forever, a
    /// device such as `/dev/zero` would be read without end.
    static func loadFileReportingReads(_ path: String) throws -> (contents: JournalContents, info: stat) {
        // O_NONBLOCK so that opening a FIFO returns at once; a regular file reads as without it.
        let fd = posixOpen(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK)
        guard fd >= 0 else { throw JournalFileLines.ReadFailure(code: errno) }
        defer { posixClose(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw JournalFileLines.ReadFailure(code: errno) }
        guard info.st_mode & S_IFMT == S_IFREG else {
            throw RPCError(.journalUnreadable, "\(path) is not a regular file")
        }
        let size = max(Int(info.st_size), 0)
        var lines = JournalFileLines(fd: fd, expectedSize: size)
        defer { lines.release() }
        return (try JournalCodec.load(&lines, byteCount: size), info)
    }

    func fsyncDirectory() throws {
        let fd = posixOpen(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.posix("cannot open the store directory") }
        defer { posixClose(fd) }
        if fsync(fd) != 0 { throw StoreError.posix("cannot sync the store directory") }
    }

    static func modificationDate(_ info: stat) -> Date {
        Date(timeIntervalSince1970: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
    }
}

/// The test hooks `AGENTRPC_TEST_KILL_AT_JOURNAL_WRITE=N` and
/// `AGENTRPC_TEST_KILL_AT_FRAME=N` (docs/testing.md): the process sends itself
/// SIGKILL just before the Nth write to any session journal (counted from 1
/// over the process's life: a journal's creation, each record or group of
/// records written at once), or before the Nth frame it queues for the client.
/// So a test stops the server at an exact instant of a turn, the Nth write
/// never reaching the file (the Nth frame never reaching the client), as a
/// `kill -9` from outside at that instant would.
package final class TestKillSwitch: Sendable {
    let at: Int
    private let writes = Atomic<Int>(0)

    init(at: Int) { self.at = at }

    /// Nil when the variable is not set; a value that is not a whole number
    /// from 1 to 1,000,000 is an error.
    static func from(environment: [String: String], variable: String = "AGENTRPC_TEST_KILL_AT_JOURNAL_WRITE") throws -> TestKillSwitch? {
        guard let text = environment[variable] else { return nil }
        guard let n = Int(text), n >= 1, n <= 1_000_000 else {
            throw RPCError.invalidConfiguration("\(variable) must be a whole number from 1 to 1000000", field: variable)
        }
        return TestKillSwitch(at: n)
    }

    func beforeWrite() {
        if writes.add(1, ordering: .relaxed).newValue == at { kill(getpid(), SIGKILL) }
    }
}

/// Store failures as protocol errors.
enum StoreError {
    static func unavailable(_ message: String) -> RPCError {
        RPCError(.storeUnavailable, message)
    }

    /// With the current `errno`'s text.
    static func posix(_ message: String) -> RPCError {
        let code = errno
        return RPCError(.storeUnavailable, "\(message): \(String(cString: strerror(code)))", data: ["errno": .int(Int(code))])
    }
}

/// One loaded session's journal file. Every record is one `write(2)` of a
/// whole line on a descriptor opened `O_APPEND`; a failed write is cut off
/// again so no partial line is left before the next one. The descriptor is
/// opened by the first record after a sync and closed by the sync (after its
/// `fsync`, on the descriptor the records went through): an idle loaded
/// session holds none, a running turn one.
final class FileJournal: SessionJournal {
    private struct State {
        /// Open from the first record after a sync until the sync.
        var fd: Int32?
        /// The file's length after the last complete line.
        var length: Int
        /// About how many bytes the live state takes in a snapshot; compaction
        /// is considered when the file is three times that.
        var liveEstimate: Int
        /// Records after the header or the last snapshot (see `close(final:)`).
        var records: Int
        /// When the `session/list` summary was last written (monotonic ns; nil: never).
        var summaryWritten: UInt64?
        var closed = false
    }

    let sessionID: String
    private unowned let store: JournalStore
    private let header: JournalHeader
    /// For the `session/list` summary written at each sync.
    private let config: SessionConfig
    private let headerLine: [UInt8]
    private let lock: SessionLock
    private let state: Mutex<State>
    /// The entries the last record appended, each with its JSON text (a slice
    /// of the line written): `writtenEntryText`.
    private let written = Mutex<[(id: String, text: ArraySlice<UInt8>)]>([])
    private var path: String { store.path(sessionID, ".jsonl") }
    /// Journals smaller than this are never compacted (not worth a rewrite).
    static let compactionFloor = 64 * 1024
    /// A session unloaded with more records than this since its last snapshot
    /// is rewritten as a snapshot: replaying 1,000 records takes a few
    /// milliseconds, a long journal's 20,000 several tens.
    static let snapshotAtCloseRecords = 1000

    init(store: JournalStore, header: JournalHeader, config: SessionConfig, fd: Int32?, length: Int, lock: SessionLock, records: Int = 0) {
        self.store = store
        self.sessionID = header.sessionID
        self.header = header
        self.config = config
        self.headerLine = JournalCodec.headerLine(header)
        self.lock = lock
        self.state = Mutex(State(fd: fd, length: length, liveEstimate: max(length, 1), records: records))
    }

    var length: Int { state.withLock { $0.length } }

    /// Whether the journal holds a descriptor now (tests and measurements).
    var holdsDescriptor: Bool { state.withLock { $0.fd != nil } }

    /// The descriptor, opened for appending when there is none.
    private func descriptor(_ s: inout State) throws -> Int32 {
        if let fd = s.fd { return fd }
        let fd = posixOpen(path, O_WRONLY | O_APPEND | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.posix("cannot open the journal of session '\(sessionID)' for writing") }
        s.fd = fd
        return fd
    }

    func record(_ change: TranscriptChange, at date: Date) throws {
        // One change (nearly every record): its line is written as made, with
        // no buffer of lines to copy it into, and an entry's text kept as a slice of it.
        guard case .entryAppended(let entry, let next) = change else {
            written.withLock { $0.removeAll(keepingCapacity: true) }
            return try appendRaw(try JournalCodec.line(for: change, at: date), liveBytes: 0)
        }
        let (line, range) = JournalCodec.entryLine(entry, nextEntryNumber: next, at: date)
        do {
            try appendRaw(line, liveBytes: line.count)
        } catch {
            written.withLock { $0.removeAll(keepingCapacity: true) }
            throw error
        }
        written.withLock { w in
            w.removeAll(keepingCapacity: true)
            w.append((entry.id, line[range]))
        }
    }

    func record(_ changes: [TranscriptChange], at date: Date) throws {
        try record(changes[...], at: date)
    }

    private func record(_ changes: some Collection<TranscriptChange>, at date: Date) throws {
        written.withLock { $0.removeAll(keepingCapacity: true) }
        var bytes: [UInt8] = []
        var live = 0
        var entries: [(id: String, range: Range<Int>)] = []
        for change in changes {
            if case .entryAppended(let entry, let next) = change {
                let (line, range) = JournalCodec.entryLine(entry, nextEntryNumber: next, at: date)
                entries.append((entry.id, range.lowerBound + bytes.count..<range.upperBound + bytes.count))
                live += line.count  // an entry adds to the live state; other records to what compaction drops
                bytes += line
            } else {
                bytes += try JournalCodec.line(for: change, at: date)
            }
        }
        try appendRaw(bytes, liveBytes: live)
        if !entries.isEmpty {
            written.withLock { w in w = entries.map { ($0.id, bytes[$0.range]) } }
        }
    }

    func writtenEntryText(_ id: String) -> ArraySlice<UInt8>? {
        written.withLock { w in w.first { $0.id == id }?.text }
    }

    /// Appends whole lines with one `write(2)`; `liveBytes` of them (nil: all)
    /// are live state.
    func appendRaw(_ bytes: [UInt8], liveBytes: Int? = nil) throws {
        store.killSwitch?.beforeWrite()
        try state.withLock { s in
            guard !s.closed else { throw StoreError.unavailable("the session's journal is closed") }
            let fd = try descriptor(&s)
            var written = 0
            while written < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
                if n < 0 {
                    if errno == EINTR { continue }
                    let error = StoreError.posix("cannot write the journal of session '\(sessionID)'")
                    // Leave no partial line for the next record to follow.
                    _ = ftruncate(fd, off_t(s.length))
                    throw error
                }
                written += n
            }
            s.length += bytes.count
            s.records += 1
            s.liveEstimate += liveBytes ?? bytes.count
        }
    }

    /// `fsync`s what was written and closes the descriptor. A failed `fsync`
    /// keeps it open, so the next sync asks the same descriptor again.
    func fsyncFile() throws {
        try state.withLock { s in
            guard let fd = s.fd else { return }
            if fsync(fd) != 0 { throw StoreError.posix("cannot sync the journal of session '\(sessionID)'") }
            posixClose(fd)
            s.fd = nil
        }
    }

    /// Closes the descriptor after syncing it, ignoring a failure (a load that
    /// wrote nothing, or a create whose sync already succeeded).
    func releaseDescriptor() {
        state.withLock { s in
            guard let fd = s.fd else { return }
            _ = fsync(fd)
            posixClose(fd)
            s.fd = nil
        }
    }

    func truncate(to length: Int) throws {
        try state.withLock { s in
            let fd = try descriptor(&s)
            if ftruncate(fd, off_t(length)) != 0 { throw StoreError.posix("cannot cut the torn last line of session '\(sessionID)'") }
            s.length = length
            _ = fsync(fd)
        }
    }

    func sync(_ transcript: Transcript) throws {
        try fsyncFile()
        try compactIfLarge(transcript)
        let now = Dispatching.monotonicNanoseconds()
        let due = state.withLock { s in s.summaryWritten.map { now &- $0 >= store.summaryInterval } ?? true }
        if due { writeSummary(transcript) }
    }

    private func writeSummary(_ transcript: Transcript) {
        var summary = JournalStore.summary(of: header, config: config, transcript: transcript)
        summary.updatedAt = transcript.updatedAt
        store.writeSummary(summary)
        let now = Dispatching.monotonicNanoseconds()
        state.withLock { $0.summaryWritten = now }
    }

    /// Rewrites the journal as one snapshot when it is more than three times the
    /// size of its live state (after many mutations), between turns only.
    private func compactIfLarge(_ transcript: Transcript) throws {
        let (length, estimate) = state.withLock { ($0.length, $0.liveEstimate) }
        guard length > Self.compactionFloor, length > 3 * estimate, transcript.openTurn == nil else { return }
        let live = headerLine.count + (try JournalCodec.snapshotLine(transcript, at: Date())).count
        state.withLock { $0.liveEstimate = live }
        if length > 3 * live { try rewrite(transcript) }
    }

    /// Never a moment without a valid journal: the snapshot goes to a temporary
    /// file, is synced, renamed over the journal, and the directory synced.
    func rewrite(_ transcript: Transcript) throws {
        let target = path
        let temp = store.path(sessionID, ".jsonl.tmp-\(getpid())")
        let bytes = headerLine + (try JournalCodec.snapshotLine(transcript, at: Date()))
        let fd = posixOpen(temp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.posix("cannot write a snapshot of session '\(sessionID)'") }
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + written, $0.count - written) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 {
                let error = StoreError.posix("cannot write a snapshot of session '\(sessionID)'")
                posixClose(fd)
                unlink(temp)
                throw error
            }
            written += n
        }
        guard fsync(fd) == 0 else {
            let error = StoreError.posix("cannot sync a snapshot of session '\(sessionID)'")
            posixClose(fd)
            unlink(temp)
            throw error
        }
        posixClose(fd)
        guard rename(temp, target) == 0 else {
            let error = StoreError.posix("cannot replace the journal of session '\(sessionID)'")
            unlink(temp)
            throw error
        }
        try store.fsyncDirectory()
        // The next record opens the new file.
        state.withLock { s in
            if let old = s.fd { posixClose(old) }
            s.fd = nil
            s.length = bytes.count
            s.liveEstimate = bytes.count
            s.records = 0
        }
    }

    func close(final transcript: Transcript) {
        let (records, closed) = state.withLock { ($0.records, $0.closed) }
        if !closed {
            if records > Self.snapshotAtCloseRecords, transcript.openTurn == nil {
                // The journal stays valid whatever happens here (`rewrite` replaces it by
                // rename), so a failure costs only the faster next load.
                do { try rewrite(transcript) } catch {
                    store.logger.warning("session \(sessionID): the journal was not rewritten as a snapshot at close: \(error)")
                }
            }
            writeSummary(transcript)
        }
        close()
    }

    func close() {
        let wasOpen = state.withLock { s -> Bool in
            guard !s.closed else { return false }
            s.closed = true
            if let fd = s.fd {
                _ = fsync(fd)
                posixClose(fd)
                s.fd = nil
            }
            return true
        }
        if wasOpen { lock.release() }
    }

    deinit { close() }
}

// The journal types have `close()` methods of their own; these name the system calls.
private func posixOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 { open(path, flags, mode) }
private func posixClose(_ fd: Int32) { _ = close(fd) }

/// Journals being read and loaded now, by path. A second reader of a journal
/// while it is being read (the index checking the journals at start while a
/// client resumes one of them, a journal a crash left ahead of the index)
/// waits for the first and takes its result when the file is still the one
/// that was read, instead of loading it again. Nothing is kept once a read
/// is done.
final class SharedJournalReads: Sendable {
    /// `@unchecked Sendable`: `finished`, `result` and `waiting` are only touched under `condition`.
    private final class Read: @unchecked Sendable {
        // A condition, not a Mutex: a second reader's thread must block until the first read is done.
        let condition = ConditionLock()
        var finished = false
        var result: (contents: JournalContents, info: stat)?
        var waiting = 0
    }

    private let inFlight = Mutex<[String: Read]>([:])
    /// How long a second reader waits for the first before reading itself, in seconds.
    static let waitLimit = 10.0
    private let readAndLoad: @Sendable (String) throws -> (contents: JournalContents, info: stat)

    init(readAndLoad: @escaping @Sendable (String) throws -> (contents: JournalContents, info: stat) = SharedJournalReads.readAndLoad) {
        self.readAndLoad = readAndLoad
    }

    /// How many readers wait for the read of `path` now (tests).
    func waiting(_ path: String) -> Int {
        guard let read = inFlight.withLock({ $0[path] }) else { return 0 }
        read.condition.lock()
        defer { read.condition.unlock() }
        return read.waiting
    }

    func load(_ path: String) throws -> (contents: JournalContents, info: stat) {
        let (read, first) = inFlight.withLock { reads -> (Read, Bool) in
            if let running = reads[path] { return (running, false) }
            let read = Read()
            reads[path] = read
            return (read, true)
        }
        guard first else {
            read.condition.lock()
            read.waiting += 1
            let deadline = Date(timeIntervalSinceNow: Self.waitLimit)
            while !read.finished && read.condition.wait(until: deadline) {}
            // Nil when the first read failed or is still under way.
            let shared = read.finished ? read.result : nil
            read.condition.unlock()
            if let shared {
                var now = stat()
                if stat(path, &now) == 0, JournalStore.sameFile(now, shared.info) { return shared }
            }
            return try readAndLoad(path)
        }
        defer {
            inFlight.withLock { $0[path] = nil }
            read.condition.lock()
            read.finished = true
            read.condition.broadcast()
            read.condition.unlock()
        }
        let loaded = try readAndLoad(path)
        read.condition.lock()
        read.result = loaded
        read.condition.unlock()
        return loaded
    }

    @Sendable static func readAndLoad(_ path: String) throws -> (contents: JournalContents, info: stat) {
        try JournalStore.loadFile(path)
    }
}
