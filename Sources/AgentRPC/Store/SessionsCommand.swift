import AgentRPCProtocol
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

/// `agentrpc sessions`: the store for people (list, show, delete, prune,
/// export, import), on the same store the server uses (`--store DIR`, else
/// the default directory). Nothing is removed without an id or an explicit
/// `--older-than`; a session another process has loaded is never touched.
package enum SessionsCommand {
    static let usage = """
        USAGE
          agentrpc sessions list [--json] [--limit N] [--query TEXT] [--model NAME]
          agentrpc sessions show ID [--json]
          agentrpc sessions delete ID...
          agentrpc sessions prune --older-than AGE [--dry-run]     AGE: 30d, 12h, 45m or 90s
          agentrpc sessions export ID [--out FILE]                 one self-contained JSONL, media included (default: stdout)
          agentrpc sessions import FILE [--allow-missing-media]    load an exported session into this store
        Every subcommand takes --store DIR (default $XDG_STATE_HOME/agentrpc/sessions, else
        ~/.local/state/agentrpc/sessions).
        """

    /// Exit status: 0 done, 1 a session could not be handled (unknown, locked,
    /// unreadable), 2 a usage error.
    package static func runCommandLine(
        arguments: [String], environment: [String: String] = ProcessEnvironment.current(),
        output: (String) -> Void, errors: (String) -> Void
    ) -> Int32 {
        let scanned: CommandLineOptions.Scanned
        switch CommandLineOptions.scanWithPositionals(
            arguments, flags: ["--json", "--dry-run", "--allow-missing-media", "--help"], valued: ["--store", "--limit", "--query", "--model", "--older-than", "--out"],
            endingFlags: ["--help"]) {
        case .success(let read): scanned = read
        case .failure(let problem): return usageError(problem.message, errors)
        }
        let flags = scanned.flags
        if flags.contains("--help") {
            output(usage)
            return 0
        }
        let positional = scanned.positionals
        let values = scanned.values
        guard let sub = positional.first else { return usageError("sessions needs a subcommand", errors) }
        let args = Array(positional.dropFirst())
        var directory = values["--store"] ?? JournalStore.defaultDirectory(environment: environment)
        if directory.isEmpty { return usageError("--store needs a directory", errors) }
        if !directory.hasPrefix("/") { directory = FileManager.default.currentDirectoryPath + "/" + directory }
        let store = JournalStore(directory: directory, logger: Logger(level: .off))
        defer { store.releaseOwner() }
        let json = flags.contains("--json")
        switch sub {
        case "list":
            guard args.isEmpty else { return usageError("list takes no arguments", errors) }
            var limit = Int.max
            if let v = values["--limit"] {
                guard let n = Int(v), n > 0 else { return usageError("--limit needs a positive integer", errors) }
                limit = n
            }
            let filter = StoredSessionFilter(query: values["--query"], model: values["--model"])
            return list(store, limit: limit, filter: filter, json: json, output: output)
        case "show":
            guard args.count == 1 else { return usageError("show takes one session id", errors) }
            return show(store, args[0], json: json, output: output, errors: errors)
        case "delete":
            guard !args.isEmpty else { return usageError("delete needs at least one session id", errors) }
            var status: Int32 = 0
            for id in args {
                do {
                    try SessionIDRule.check(id)
                    if try store.delete(id) {
                        output("deleted \(id)")
                    } else {
                        errors("agentrpc sessions: no session '\(id)' in \(directory)")
                        status = 1
                    }
                } catch {
                    errors("agentrpc sessions: \(describe(error, id))")
                    status = 1
                }
            }
            return status
        case "prune":
            guard args.isEmpty else { return usageError("prune takes no session ids (use delete)", errors) }
            guard let text = values["--older-than"] else {
                return usageError("prune needs --older-than AGE (e.g. 30d): it never removes sessions without one", errors)
            }
            guard let age = parseAge(text) else { return usageError("--older-than takes a number and d, h, m or s, e.g. 30d", errors) }
            let dryRun = flags.contains("--dry-run")
            let report = store.prune(olderThan: Date().addingTimeInterval(-age), keepNewest: nil, dryRun: dryRun) { _ in false }
            for id in report.removed { output((dryRun ? "would delete " : "deleted ") + id) }
            for (id, pid) in report.skipped {
                output("skipped \(id): loaded by another agentrpc process" + (pid.map { " (pid \($0))" } ?? ""))
            }
            output("\(report.removed.count) session(s) \(dryRun ? "would be " : "")deleted, \(report.skipped.count) skipped")
            return 0
        case "export":
            guard args.count == 1 else { return usageError("export takes one session id", errors) }
            return export(store, args[0], to: values["--out"], output: output, errors: errors)
        case "import":
            guard args.count == 1 else { return usageError("import takes one file", errors) }
            do {
                let imported = try store.importSession(from: args[0], allowMissingMedia: flags.contains("--allow-missing-media"))
                output("imported \(imported.id)" + (imported.media > 0 ? " with \(imported.media) image(s) or audio clip(s)" : ""))
                if !imported.missing.isEmpty { errors("agentrpc sessions: warning: session '\(imported.id)': " + ToolMedia.missingNote(imported.missing)) }
                return 0
            } catch {
                errors("agentrpc sessions: \(describe(error, nil))")
                return 1
            }
        default:
            return usageError("unknown sessions subcommand '\(sub)'", errors)
        }
    }

    private static func usageError(_ message: String, _ errors: (String) -> Void) -> Int32 {
        errors("agentrpc sessions: \(message)\n\(usage)")
        return 2
    }

    private static func describe(_ error: any Error, _ id: String?) -> String {
        guard let rpc = error as? RPCError else { return "\(error)" }
        switch rpc.kind {
        case .sessionLocked:
            let pid = rpc.data["pid"]?.intValue.map { " (pid \($0))" } ?? ""
            return "session '\(id ?? "")' is loaded by another agentrpc process\(pid); close it there first"
        case .sessionNotFound:
            return "no session '\(id ?? "")' in this store"
        default:
            return rpc.message
        }
    }

    /// `30d`, `12h`, `45m`, `90s`: seconds.
    static func parseAge(_ text: String) -> TimeInterval? {
        guard let unit = text.last, let n = Int(text.dropLast()), n >= 0, n <= 100_000 else { return nil }
        switch unit {
        case "d": return Double(n) * 86_400
        case "h": return Double(n) * 3_600
        case "m": return Double(n) * 60
        case "s": return Double(n)
        default: return nil
        }
    }

    // MARK: list

    private static func list(_ store: JournalStore, limit: Int, filter: StoredSessionFilter, json: Bool, output: (String) -> Void) -> Int32 {
        var shown: [StoredSessionSummary] = []
        var after: ListPosition?
        while shown.count < limit {
            let page = store.page(after: after, count: min(500, limit - shown.count), filter: filter) { _ in false }
            guard let last = page.last else { break }
            shown += page
            after = ListPosition(updatedAt: last.updatedAt, sessionID: last.sessionID)
        }
        if json {
            let items: [JSONValue] = shown.map { s in
                var o: [String: JSONValue] = [
                    "sessionId": .string(s.sessionID), "createdAt": .string(Timestamp.iso8601(s.createdAt)),
                    "updatedAt": .string(Timestamp.iso8601(s.updatedAt)), "revision": .int(s.revision), "entryCount": .int(s.entryCount),
                    "locked": .bool(s.locked),
                ]
                if let t = s.title { o["title"] = .string(t) }
                if let u = s.userId { o["userId"] = .string(u) }
                if let m = s.model { o["model"] = .string(m) }
                if let p = s.lockedBy { o["lockedBy"] = .int(Int(p)) }
                return .object(o)
            }
            output(String(decoding: JSONValue.array(items).serialized(), as: UTF8.self))
            return 0
        }
        if shown.isEmpty {
            output("no stored sessions in \(store.directory)")
            return 0
        }
        var rows = [["ID", "UPDATED", "ENTRIES", "MODEL", "TITLE"]]
        for s in shown {
            var title = s.title ?? ""
            if title.count > 60 { title = String(title.prefix(59)) + "…" }
            title = title.replacingScalars(of: "\n", with: " ")
            if s.locked { title += "  [loaded" + (s.lockedBy.map { " by pid \($0)" } ?? "") + "]" }
            rows.append([s.sessionID, localTime(s.updatedAt), String(s.entryCount), s.model ?? "", title])
        }
        var widths = [Int](repeating: 0, count: 4)
        for row in rows { for i in 0..<4 { widths[i] = max(widths[i], row[i].count) } }
        for row in rows {
            var line = ""
            for i in 0..<4 {
                let cell = row[i]
                let pad = String(repeating: " ", count: widths[i] - cell.count)
                line += (i == 2 ? pad + cell : cell + pad) + "  "
            }
            output(line + row[4])
        }
        return 0
    }

    private static func localTime(_ date: Date) -> String {
        // The local time zone's wall clock, as a DateFormatter's "yyyy-MM-dd HH:mm" gives it.
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "?" }
        return String(cFormat: "%04d-%02d-%02d %02d:%02d", Int32(parts.tm_year) + 1900, Int32(parts.tm_mon) + 1, Int32(parts.tm_mday), Int32(parts.tm_hour), Int32(parts.tm_min))
    }

    // MARK: show

    private static func show(_ store: JournalStore, _ id: String, json: Bool, output: (String) -> Void, errors: (String) -> Void) -> Int32 {
        let contents: JournalContents
        do {
            try SessionIDRule.check(id)
            contents = try store.read(id)
        } catch {
            errors("agentrpc sessions: \(describe(error, id))")
            return 1
        }
        if json {
            output(String(decoding: JSONValue.array(contents.transcript.entries.map(\.json)).serialized(), as: UTF8.self))
            return 0
        }
        let summary = JournalStore.summary(of: contents.header, config: contents.config, transcript: contents.transcript)
        output("session \(id)" + (summary.title.map { ": \($0)" } ?? ""))
        output("created \(localTime(summary.createdAt)), updated \(localTime(summary.updatedAt)), model \(summary.model ?? "none"), \(summary.entryCount) entries")
        if let from = contents.header.forkedFrom { output("forked from \(from)") }
        let (locked, pid) = SessionLock.probe(path: store.path(id, ".lock"), directory: store.directory, owner: nil)
        if locked { output("loaded now by another agentrpc process" + (pid.map { " (pid \($0))" } ?? "")) }
        for w in contents.warnings { output("warning: \(w.message)") }
        if contents.tornBytes > 0 { output("warning: the last line of the journal was cut short by a crash (\(contents.tornBytes) bytes, ignored)") }
        if contents.transcript.openTurn != nil { output("warning: the last turn was interrupted (it is recovered when the session is resumed)") }
        for entry in contents.transcript.entries {
            output("")
            output(render(entry.json))
        }
        return 0
    }

    /// One entry for reading: who said what, tool calls and their outcomes.
    static func render(_ e: JSONValue) -> String {
        let text = e["text"]?.stringValue ?? ""
        func indent(_ s: String) -> String { s.split(separator: "\n", omittingEmptySubsequences: false).map { "  " + $0 }.joined(separator: "\n") }
        func compact(_ v: JSONValue?) -> String {
            guard let v else { return "" }
            if let s = v.stringValue { return s }
            let out = String(decoding: v.serialized(), as: UTF8.self)
            return out.count > 400 ? String(out.prefix(399)) + "…" : out
        }
        switch e["type"]?.stringValue {
        case "prompt":
            let images = e["images"]?.arrayValue?.count ?? 0
            return "user:\n" + indent(text) + (images > 0 ? "\n  [\(images) image(s)]" : "")
        case "response":
            var head = "assistant:"
            if e["incomplete"]?.boolValue == true { head = "assistant (incomplete):" }
            return head + "\n" + indent(text)
        case "reasoning":
            return "reasoning:\n" + indent(text)
        case "toolCalls":
            var lines: [String] = []
            if !text.isEmpty { lines.append("assistant:\n" + indent(text)) }
            for call in e["calls"]?.arrayValue ?? [] {
                lines.append("tool call \(call["name"]?.stringValue ?? "?") [\(call["callId"]?.stringValue ?? "")]: \(compact(call["arguments"]))")
            }
            return lines.joined(separator: "\n")
        case "toolOutput":
            return "tool \(e["name"]?.stringValue ?? "?") [\(e["callId"]?.stringValue ?? "")] \(e["outcome"]?.stringValue ?? "?"): \(compact(e["content"]))"
        default:
            return compact(e)
        }
    }

    // MARK: export

    private static func export(_ store: JournalStore, _ id: String, to path: String?, output: (String) -> Void, errors: (String) -> Void) -> Int32 {
        do {
            try SessionIDRule.check(id)
            let missing: [MediaReference]
            if let path {
                // Written piece by piece (a media line at a time), whole or not at all.
                let temporary = path + ".tmp-\(getpid())"
                let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
                guard fd >= 0 else {
                    errors("agentrpc sessions: cannot write \(path)")
                    return 1
                }
                do {
                    missing = try store.exportSession(id) { bytes in
                        guard writeAll(fd, bytes) else { throw StoreError.posix("cannot write \(path)") }
                    }
                } catch {
                    close(fd)
                    unlink(temporary)
                    throw error
                }
                let synced = fsync(fd) == 0
                close(fd)
                guard synced, rename(temporary, path) == 0 else {
                    unlink(temporary)
                    errors("agentrpc sessions: cannot write \(path)")
                    return 1
                }
                output("exported \(id) to \(path)")
            } else {
                // The lines end in a newline already.
                missing = try store.exportSession(id) { bytes in output(String(decoding: bytes.dropLast(), as: UTF8.self)) }
            }
            if !missing.isEmpty {
                errors("agentrpc sessions: warning: session '\(id)': " + ToolMedia.missingNote(missing) + "; the export does not carry them")
            }
            return 0
        } catch {
            errors("agentrpc sessions: \(describe(error, id))")
            return 1
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return true }
            var written = 0
            while written < buffer.count {
                let n = write(fd, base + written, buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                written += n
            }
            return true
        }
    }
}
