#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

// File reads and path resolution that needed Foundation's `FileHandle` and
// `NSString`, on the C library (FoundationParityTests compare them with Foundation).

extension StringProtocol {
    /// `NSString.standardizingPath` of an absolute path as swift-corelibs-foundation
    /// gives it: "." and empty components dropped, ".." taking off the last component
    /// of what is resolved so far, no trailing "/", and a symbolic link among the
    /// components replaced by its target when that target exists as written (a
    /// relative one looked up from the working directory, as corelibs does).
    /// A relative path is returned as it is.
    package var resolvingPathLikeFoundation: String {
        guard hasPrefix("/") else { return String(self) }
        var resolved = "/"
        // Bounds the links followed, as the kernel's ELOOP does: a loop of links ends.
        var linksLeft = 40
        var pending: [String] = Self.components(String(self)).reversed()
        while let component = pending.popLast() {
            switch component {
            case ".": continue
            case "..":
                if let slash = resolved.lastIndex(of: "/") { resolved = slash == resolved.startIndex ? "/" : String(resolved[..<slash]) }
            default:
                let candidate = resolved == "/" ? "/" + component : resolved + "/" + component
                guard linksLeft > 0, let target = Self.linkTarget(candidate) else {
                    resolved = candidate
                    continue
                }
                linksLeft -= 1
                if target.hasPrefix("/") { resolved = "/" }
                pending.append(contentsOf: Self.components(target).reversed())
            }
        }
        return resolved
    }

    private static func components(_ path: String) -> [String] {
        path.split(separator: "/").map(String.init)
    }

    /// The target of the symbolic link at `path`, nil when it is not one.
    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        let target = String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return access(target, F_OK) == 0 ? target : nil
    }
}

/// Whole-file and one-byte reads without Foundation's `FileHandle`.
package enum FileBytes {
    /// At most `limit` bytes from the start of the file at `path`; nil when it cannot
    /// be opened or read.
    package static func read(_ path: String, upTo limit: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < limit {
            let wanted = min(chunk.count, limit - bytes.count)
            let n = chunk.withUnsafeMutableBytes { cRead(fd, $0.baseAddress, wanted) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            bytes.append(contentsOf: chunk[..<n])
        }
        return bytes
    }

    /// The byte at `offset` of the file at `path`; nil when there is none or it cannot be read.
    package static func byte(_ path: String, at offset: Int) -> UInt8? {
        guard offset >= 0 else { return nil }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var byte: UInt8 = 0
        while true {
            let n = pread(fd, &byte, 1, off_t(offset))
            if n < 0 && errno == EINTR { continue }
            return n == 1 ? byte : nil
        }
    }
}

/// `NSTemporaryDirectory()` as Foundation gives it on Linux: `$TMPDIR` ending in "/",
/// else "/tmp/".
package var systemTemporaryDirectory: String {
    guard let value = getenv("TMPDIR") else { return "/tmp/" }
    let path = String(cString: value)
    return path.hasSuffix("/") ? path : path + "/"
}

/// What is at a path, as `FileManager.fileExists(atPath:isDirectory:)` tells it (links
/// followed), without Foundation's `ObjCBool`.
package enum PathKind: Equatable, Sendable {
    case directory
    /// Anything else that exists: a file, a device, a socket.
    case other

    /// Nil when nothing is there (or a link leads nowhere).
    package static func of(_ path: String) -> PathKind? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return info.st_mode & S_IFMT == S_IFDIR ? .directory : .other
    }

    /// The paths, relative to `directory`, of everything below it, as
    /// `FileManager.enumerator(atPath:)` lists them: directories descended into,
    /// links to directories not followed, unreadable directories skipped; in no
    /// particular order. At most `limit` entries, so a huge tree cannot grow it unbounded.
    package static func entries(under directory: String, limit: Int = 1 << 20) -> [String] {
        var found: [String] = []
        var pending = [""]
        while let relative = pending.popLast(), found.count < limit {
            let path = relative.isEmpty ? directory : directory.appendingPathComponent(relative)
            guard let stream = opendir(path) else { continue }
            defer { closedir(stream) }
            while let entry = readdir(stream), found.count < limit {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                    String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
                }
                if name == "." || name == ".." { continue }
                let child = relative.isEmpty ? name : relative + "/" + name
                found.append(child)
                var info = stat()
                if lstat(directory.appendingPathComponent(child), &info) == 0 && info.st_mode & S_IFMT == S_IFDIR {
                    pending.append(child)
                }
            }
        }
        return found
    }
}

/// The C library's `read(2)`, named so `FileBytes.read` does not shadow it.
private func cRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
