// The path methods of Foundation's `NSString`, on the standard library, so no module
// needs Foundation; each gives NSString's result (PortabilityTests compare them).

extension StringProtocol {
    /// Whether the path is nothing but slashes ("" included).
    private var isOnlySlashes: Bool { allSatisfy { $0 == "/" } }

    /// The path with runs of "/" made one and a trailing "/" removed (not the root's);
    /// NSString makes "//" (and longer runs alone) empty.
    private var withTidySlashes: String {
        if count > 1 && isOnlySlashes { return "" }
        var out = ""
        var previousSlash = false
        for character in self {
            if character == "/" && previousSlash { continue }
            previousSlash = character == "/"
            out.append(character)
        }
        if out.count > 1 && out.hasSuffix("/") { out.removeLast() }
        return out
    }

    /// `NSString.deletingLastPathComponent`: "/a/b/" → "/a", "/a" → "/", "a" → "".
    package var deletingLastPathComponent: String {
        let path = withTidySlashes
        guard path != "/", let slash = path.lastIndex(of: "/") else { return path == "/" ? path : "" }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// `NSString.lastPathComponent`: "/a/b/" → "b", "/" → "/".
    package var lastPathComponent: String {
        let path = withTidySlashes
        guard path != "/", let slash = path.lastIndex(of: "/") else { return path }
        return String(path[path.index(after: slash)...])
    }

    /// `NSString.appendingPathComponent(_:)` as Foundation on Linux does it: joined by a
    /// "/" unless either is empty or the path ends with one; nothing else tidied.
    package func appendingPathComponent(_ component: some StringProtocol) -> String {
        if component.isEmpty { return String(self) }
        if isEmpty || hasSuffix("/") { return String(self) + component }
        return self + "/" + component
    }

    /// `NSString.pathExtension`: what follows the last "." of the last component, "" when
    /// the component has no "." or only a leading one (".profile").
    package var pathExtension: String {
        let last = lastPathComponent
        guard let dot = last.lastIndex(of: "."), dot != last.startIndex else { return "" }
        return String(last[last.index(after: dot)...])
    }
}
