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

/// Reads the members of an ACP request's params, naming the offending member
/// in the `invalidParams` error it throws (`data.field`), as agentrpc's own
/// methods do.
struct ACPParams {
    let value: [String: JSONValue]
    let method: String

    init(_ raw: JSONValue?, method: String) throws {
        self.method = method
        switch raw {
        case nil, .null?: value = [:]
        case .object(let members)?: value = members
        default: throw RPCError.invalidParams("\(method): params must be an object", field: "")
        }
    }

    func string(_ key: String) throws -> String {
        guard let v = value[key] else { throw RPCError.invalidParams("\(method): \(key) is required", field: key) }
        guard let s = v.stringValue else { throw RPCError.invalidParams("\(method): \(key) must be a string", field: key) }
        return s
    }

    func optionalString(_ key: String) throws -> String? {
        guard let v = value[key], !v.isNull else { return nil }
        guard let s = v.stringValue else { throw RPCError.invalidParams("\(method): \(key) must be a string", field: key) }
        return s
    }

    func optionalInt(_ key: String) throws -> Int? {
        guard let v = value[key], !v.isNull else { return nil }
        guard let n = v.intValue else { throw RPCError.invalidParams("\(method): \(key) must be an integer", field: key) }
        return n
    }

    func array(_ key: String) throws -> [JSONValue] {
        guard let v = value[key] else { throw RPCError.invalidParams("\(method): \(key) is required", field: key) }
        guard let a = v.arrayValue else { throw RPCError.invalidParams("\(method): \(key) must be an array", field: key) }
        return a
    }

    func optionalArray(_ key: String) throws -> [JSONValue] {
        guard let v = value[key], !v.isNull else { return [] }
        guard let a = v.arrayValue else { throw RPCError.invalidParams("\(method): \(key) must be an array", field: key) }
        return a
    }

    /// An absolute path (ACP requires `cwd` and roots to be absolute).
    func absolutePath(_ key: String) throws -> String {
        let path = try string(key)
        guard path.hasPrefix("/") else { throw RPCError.invalidParams("\(method): \(key) must be an absolute path", field: key) }
        return ACPPaths.normalize(path)
    }

    func absolutePaths(_ key: String) throws -> [String] {
        try optionalArray(key).enumerated().map { index, item in
            guard let path = item.stringValue, path.hasPrefix("/") else {
                throw RPCError.invalidParams("\(method): \(key)[\(index)] must be an absolute path", field: "\(key)[\(index)]")
            }
            return ACPPaths.normalize(path)
        }
    }
}

extension RPCError {
    static func invalidParams(_ message: String, field: String) -> RPCError {
        RPCError(.invalidParams, message, data: field.isEmpty ? [:] : ["field": .string(field)])
    }

    /// ACP's "authentication required" (-32000): no model can answer.
    static func authRequired(_ message: String) -> RPCError {
        RPCError(code: ErrorCode(-32000), kind: "authRequired", message: message)
    }
}

/// Paths as the session sees them: relative ones resolved against `cwd`,
/// `.` and `..` folded, and kept inside the session's roots.
enum ACPPaths {
    /// Folds `.`, `..` and repeated slashes of an absolute path, lexically
    /// (the files live on the editor's side; there is nothing to resolve here).
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." {
                if !parts.isEmpty { parts.removeLast() }
                continue
            }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// The absolute path `path` names in a session, or nil when it leaves every root.
    static func resolve(_ path: String, cwd: String, roots: [String]) -> String? {
        let absolute = normalize(path.hasPrefix("/") ? path : cwd + "/" + path)
        for root in roots where absolute == root || absolute.hasPrefix(root == "/" ? "/" : root + "/") {
            return absolute
        }
        return nil
    }

    /// The real path `absolute` (already resolved against the session) names on
    /// this machine's disk, symbolic links followed (for a file not there yet, its
    /// nearest existing directory's), or nil when that leaves every root (whose
    /// own links are followed too). The front end's own file tools use it: a link
    /// inside the workspace must not reach outside it.
    static func onDisk(_ absolute: String, roots: [String]) -> String? {
        let real = realPath(absolute)
        for root in roots.map(realPath) where real == root || real.hasPrefix(root == "/" ? "/" : root + "/") {
            return real
        }
        return nil
    }

    /// `path` with every symbolic link of its existing part resolved.
    static func realPath(_ path: String) -> String {
        var existing = normalize(path)
        var rest: [String] = []
        while true {
            if let resolved = realpath(existing, nil) {
                defer { free(resolved) }
                return normalize(([String(cString: resolved)] + rest.reversed()).joined(separator: "/"))
            }
            guard existing != "/", let slash = existing.lastIndex(of: "/") else { return normalize(path) }
            rest.append(String(existing[existing.index(after: slash)...]))
            existing = slash == existing.startIndex ? "/" : String(existing[..<slash])
        }
    }

    /// A path as the user reads it: relative to `cwd` when inside it.
    static func display(_ absolute: String, cwd: String) -> String {
        if absolute == cwd { return "." }
        if absolute.hasPrefix(cwd + "/") { return String(absolute.dropFirst(cwd.count + 1)) }
        return absolute
    }
}
