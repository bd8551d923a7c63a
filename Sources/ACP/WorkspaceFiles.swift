import AgentRPC
import AgentRPCProtocol
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// A glob as `.gitignore` writes them: `*` and `?` and `[...]` within one path
/// segment, `**` for any number of segments. A pattern with no `/` (but a
/// trailing one) matches a name at any depth; one with a `/` is anchored to
/// the directory it is read against.
struct PathGlob: Sendable, Hashable {
    let segments: [String]
    let anchored: Bool
    let directoriesOnly: Bool

    init?(_ raw: String) {
        var text = raw
        directoriesOnly = text.hasSuffix("/")
        while text.hasSuffix("/") { text.removeLast() }
        anchored = text.contains("/")
        while text.hasPrefix("/") { text.removeFirst() }
        segments = text.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        if segments.isEmpty { return nil }
    }

    /// Whether the path (segments relative to the glob's directory) matches.
    func matches(_ path: ArraySlice<String>, isDirectory: Bool) -> Bool {
        if directoriesOnly && !isDirectory { return false }
        guard anchored else {
            guard let last = path.last, segments.count == 1 else { return false }
            return Self.segmentMatches(segments[0], last)
        }
        return Self.match(segments[...], path)
    }

    private static func match(_ pattern: ArraySlice<String>, _ path: ArraySlice<String>) -> Bool {
        guard let first = pattern.first else { return path.isEmpty }
        if first == "**" {
            let rest = pattern.dropFirst()
            // `**` takes zero or more segments (one or more when it ends the pattern: `dir/**` is what is inside).
            var taken = rest.isEmpty ? 1 : 0
            while taken <= path.count {
                if match(rest, path.dropFirst(taken)) { return true }
                taken += 1
            }
            return false
        }
        guard let name = path.first, segmentMatches(first, name) else { return false }
        return match(pattern.dropFirst(), path.dropFirst())
    }

    static func segmentMatches(_ pattern: String, _ name: String) -> Bool {
        fnmatch(pattern, name, 0) == 0
    }
}

/// The rules of one `.gitignore` file, read against its directory.
struct IgnoreFile: Sendable {
    struct Rule: Sendable {
        var glob: PathGlob
        var negated: Bool
    }
    /// The directory the file is in, as segments relative to the walk's start
    /// (an ancestor's is a negative depth: how many levels above).
    let base: [String]
    let levelsAbove: Int
    let rules: [Rule]

    init?(directory: String, base: [String], levelsAbove: Int) {
        guard let data = FileManager.default.contents(atPath: directory + "/.gitignore"), data.count <= 1 << 20 else { return nil }
        var rules: [Rule] = []
        for raw in String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline) {
            var line = String(raw)
            while line.hasSuffix(" ") && !line.hasSuffix("\\ ") { line.removeLast() }
            if line.isEmpty || line.hasPrefix("#") { continue }
            let negated = line.hasPrefix("!")
            if negated { line.removeFirst() }
            if line.hasPrefix("\\") { line.removeFirst() }
            if let glob = PathGlob(line) { rules.append(Rule(glob: glob, negated: negated)) }
        }
        guard !rules.isEmpty else { return nil }
        self.base = base
        self.levelsAbove = levelsAbove
        self.rules = rules
    }
}

/// The files of a directory tree as git sees them: `.git` is skipped, every
/// `.gitignore` from the repository's root down is honoured (the last rule that
/// matches decides; a directory left out is not entered), symbolic links are
/// listed but never followed into directories. The walk is bounded by entries
/// looked at and by time, and stops when the caller says so.
struct WorkspaceWalk {
    enum Stop: Sendable, Equatable {
        case finished
        case tooManyEntries
        case outOfTime
        case cancelled
        case callerDone
    }

    let root: String
    let deadline: ContinuousClock.Instant
    var isCancelled: @Sendable () -> Bool = { false }

    /// Calls `visit` with each file (segments relative to `root`, absolute path)
    /// in sorted order, depth first, until it returns false.
    func files(_ visit: (_ relative: [String], _ absolute: String) -> Bool) -> Stop {
        var seen = 0
        return walk([], ignores: ancestorIgnores(), seen: &seen, visit)
    }

    /// The deepest directory entered: far beyond any real project, and a bound on the recursion.
    static let maxDepth = 64

    private func walk(_ relative: [String], ignores inherited: [IgnoreFile], seen: inout Int,
                      _ visit: (_ relative: [String], _ absolute: String) -> Bool) -> Stop {
        let directory = relative.isEmpty ? root : root + "/" + relative.joined(separator: "/")
        var ignores = inherited
        if let own = IgnoreFile(directory: directory, base: relative, levelsAbove: 0) { ignores.append(own) }
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return .finished }
        for name in names.sorted() {
            seen += 1
            if seen > ACPToolBounds.maxWalkedEntries { return .tooManyEntries }
            if seen % 256 == 0 {
                if isCancelled() { return .cancelled }
                if ContinuousClock.now >= deadline { return .outOfTime }
            }
            if name == ".git" { continue }
            let path = relative + [name]
            let absolute = directory + "/" + name
            var info = stat()
            guard lstat(absolute, &info) == 0 else { continue }
            let isDirectory = (info.st_mode & S_IFMT) == S_IFDIR
            if Self.ignored(path, isDirectory: isDirectory, by: ignores) { continue }
            if isDirectory {
                guard path.count < Self.maxDepth else { continue }
                let stop = walk(path, ignores: ignores, seen: &seen, visit)
                if stop != .finished { return stop }
            } else if !visit(path, absolute) {
                return .callerDone
            }
        }
        return .finished
    }

    static func ignored(_ path: [String], isDirectory: Bool, by files: [IgnoreFile]) -> Bool {
        var ignored = false
        for file in files {
            // The path as the ignore file's directory sees it.
            let relative: [String]
            if file.levelsAbove > 0 {
                relative = file.base + path
            } else {
                guard path.count > file.base.count, Array(path.prefix(file.base.count)) == file.base else { continue }
                relative = Array(path.dropFirst(file.base.count))
            }
            for rule in file.rules where rule.glob.matches(relative[...], isDirectory: isDirectory) {
                ignored = !rule.negated
            }
        }
        return ignored
    }

    /// The `.gitignore` files above `root`, up to the repository's root (the
    /// directory holding `.git`), outermost first. None when `root` is in no repository.
    private func ancestorIgnores() -> [IgnoreFile] {
        var found: [IgnoreFile] = []
        var names: [String] = []
        var directory = root
        for level in 0..<ACPToolBounds.maxIgnoreAncestors {
            if FileManager.default.fileExists(atPath: directory + "/.git") {
                return found.reversed()
            }
            guard directory != "/", let slash = directory.lastIndex(of: "/") else { return [] }
            names.insert(String(directory[directory.index(after: slash)...]), at: 0)
            directory = slash == directory.startIndex ? "/" : String(directory[..<slash])
            // Rules of a file `level + 1` levels up see paths prefixed with the names between.
            if let file = IgnoreFile(directory: directory, base: names, levelsAbove: level + 1) { found.append(file) }
        }
        return []
    }
}

/// `list_files` and `search`: read-only tools the front end always runs itself,
/// on the workspace's files on disk (an editor's unsaved changes are not seen).
struct WorkspaceTools: Sendable {
    let session: ACPSession

    /// The directory a call names (`path`, default the workspace root), on disk
    /// and inside the roots; else the problem for the model.
    func directory(_ arguments: JSONValue) -> Result<String, ToolRunError> {
        let raw = arguments["path"]?.stringValue ?? "."
        guard let lexical = ACPPaths.resolve(raw, cwd: session.cwd, roots: session.roots),
              let real = ACPPaths.onDisk(lexical, roots: session.roots) else {
            return .failure(ToolRunError("\(raw) is outside the workspace (\(session.roots.joined(separator: ", "))); only paths inside it can be used"))
        }
        guard PathKind.of(real) == .directory else {
            return .failure(ToolRunError("\(raw) is not a directory"))
        }
        return .success(real)
    }

    static func limit(_ arguments: JSONValue, default value: Int, max: Int) -> Int {
        min(max, Swift.max(1, arguments["limit"]?.intValue ?? value))
    }

    /// How a file is named in the answer: relative to `cwd` when inside it.
    private func shown(_ absolute: String) -> String {
        ACPPaths.display(absolute, cwd: ACPPaths.realPath(session.cwd))
    }

    /// The note a walk that did not finish adds.
    static func note(_ stop: WorkspaceWalk.Stop) -> String? {
        switch stop {
        case .finished, .callerDone: nil
        case .tooManyEntries: "[stopped after looking at \(ACPToolBounds.maxWalkedEntries) entries: name a smaller directory in path]"
        case .outOfTime: "[stopped after \(Int(ACPToolBounds.walkSeconds)) s: name a smaller directory in path, or a narrower glob]"
        case .cancelled: "[cancelled]"
        }
    }

    func listFiles(_ arguments: JSONValue) async -> ToolRun {
        let root: String
        switch directory(arguments) {
        case .success(let d): root = d
        case .failure(let e): return .failed(e.message)
        }
        let glob = arguments["pattern"]?.stringValue.flatMap { $0 == "*" || $0 == "**" ? nil : PathGlob($0) }
        let limit = Self.limit(arguments, default: ACPToolBounds.defaultListedFiles, max: ACPToolBounds.maxListedFiles)
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(ACPToolBounds.walkSeconds))
        let shownBase = self
        return await RegexWorkers.run {
            var lines: [String] = []
            var more = false
            let walk = WorkspaceWalk(root: root, deadline: deadline, isCancelled: { RegexWorkers.currentCancellation?.isCancelled == true })
            let stop = walk.files { relative, absolute in
                if let glob, !glob.matches(relative[...], isDirectory: false) { return true }
                if lines.count == limit {
                    more = true
                    return false
                }
                lines.append(shownBase.shown(absolute))
                return true
            }
            if lines.isEmpty { lines.append("No files" + (glob == nil ? "." : " match \(arguments["pattern"]?.stringValue ?? "")") + ".") }
            if more { lines.append("[more files not shown: the first \(limit); name a directory in path or a narrower pattern]") }
            if let note = Self.note(stop) { lines.append(note) }
            return ToolRun(outcome: "ok", content: .string(lines.joined(separator: "\n")))
        }
    }

    func search(_ arguments: JSONValue) async -> ToolRun {
        guard let pattern = arguments["pattern"]?.stringValue, !pattern.isEmpty else { return .failed("pattern is required") }
        let regex: BoundedRegex
        do {
            var options: BoundedRegex.Options = [.anchorsMatchLines]
            if arguments["ignore_case"]?.boolValue == true { options.insert(.caseInsensitive) }
            regex = try BoundedRegex(pattern, options: options)
        } catch {
            return .failed("pattern is not a valid regular expression: \(error)")
        }
        let root: String
        switch directory(arguments) {
        case .success(let d): root = d
        case .failure(let e): return .failed(e.message)
        }
        let glob = arguments["glob"]?.stringValue.flatMap(PathGlob.init)
        let limit = Self.limit(arguments, default: ACPToolBounds.defaultSearchMatches, max: ACPToolBounds.maxSearchMatches)
        let deadline = ContinuousClock.now.advanced(by: .clampedSeconds(ACPToolBounds.walkSeconds))
        let roots = session.roots
        let shownBase = self
        return await RegexWorkers.run {
            var lines: [String] = []
            var skipped: [String] = []
            var more = false
            let walk = WorkspaceWalk(root: root, deadline: deadline, isCancelled: { RegexWorkers.currentCancellation?.isCancelled == true })
            let stop = walk.files { relative, absolute in
                if let glob, !glob.matches(relative[...], isDirectory: false) { return true }
                // A link is read only where it leads inside the workspace.
                guard ACPPaths.onDisk(absolute, roots: roots) != nil else { return true }
                guard let text = Self.searchableText(absolute, skipped: &skipped, shown: shownBase.shown(absolute)) else { return true }
                let offsets: [Int]
                do throws(RegexBudgetExceeded) {
                    offsets = try regex.matchOffsets(in: text, limit: limit - lines.count + 1)
                } catch {
                    if error.cancelled { return false }
                    skipped.append("\(shownBase.shown(absolute)) (the pattern took too long on it)")
                    return true
                }
                for (line, content) in Self.lines(of: text, at: offsets) {
                    if lines.count == limit {
                        more = true
                        return false
                    }
                    lines.append("\(shownBase.shown(absolute)):\(line): \(content)")
                }
                return true
            }
            if lines.isEmpty { lines.append("No matches.") }
            if more { lines.append("[more matches not shown: the first \(limit); name a directory in path, a glob, or a narrower pattern]") }
            if !skipped.isEmpty {
                lines.append("[not searched: " + skipped.prefix(20).joined(separator: ", ") + (skipped.count > 20 ? ", and \(skipped.count - 20) more" : "") + "]")
            }
            if let note = Self.note(stop) { lines.append(note) }
            return ToolRun(outcome: "ok", content: .string(lines.joined(separator: "\n")))
        }
    }

    /// A file's text when it is worth searching: not too large, not binary.
    private static func searchableText(_ path: String, skipped: inout [String], shown: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        if Int(info.st_size) > ACPToolBounds.maxSearchedFileBytes {
            skipped.append("\(shown) (larger than \(ACPToolBounds.maxSearchedFileBytes / (1024 * 1024)) MiB)")
            return nil
        }
        guard let data = FileManager.default.contents(atPath: path) else { return nil }
        // A NUL in the first 8 KiB: binary, as git decides it.
        if data.prefix(8192).contains(0) { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    /// The 1-based line numbers and texts (cut) of the lines holding the matches at UTF-16 `offsets`, each line once.
    static func lines(of text: String, at offsets: [Int]) -> [(Int, String)] {
        var out: [(Int, String)] = []
        var line = 1
        var lineStart = text.utf16.startIndex
        var position = 0
        var index = text.utf16.startIndex
        for offset in offsets {
            while position < offset, index < text.utf16.endIndex {
                if text.utf16[index] == 0x0A {
                    line += 1
                    lineStart = text.utf16.index(after: index)
                }
                index = text.utf16.index(after: index)
                position += 1
            }
            if out.last?.0 == line { continue }
            let end = text.utf16[lineStart...].firstIndex(of: 0x0A) ?? text.utf16.endIndex
            let content = String(text[lineStart..<end])
            let trimmed = content.count > ACPToolBounds.shownLineCharacters ? String(content.prefix(ACPToolBounds.shownLineCharacters)) + "…" : content
            out.append((line, trimmed.trimmingScalars { $0 == "\r" }))
        }
        return out
    }
}
