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

/// The bytes of the images and audio clips a session's tools returned, kept out
/// of its journal (docs/protocol.md, "Images in tool results"): one file per
/// distinct content, `<store>/<session id>.media/<sha256>`, written and synced
/// before the entry that names it is journaled, and read only when a request
/// is built. A journal line stays a few hundred bytes whatever the image, so
/// loading a session reads no image. A session without a store keeps them in
/// memory for its life. They go with the session (`session/delete`).
final class MediaStore: Sendable {
    /// Where the files are; nil: in memory.
    let directory: String?
    private let memory = Mutex<[String: [UInt8]]>([:])

    init(directory: String?) {
        self.directory = directory
    }

    /// The largest media kept (decoded), as for an image file given by path.
    static let maximumBytes = ImageLoading.maximumFileBytes

    /// Keeps `content`'s bytes and returns what the transcript holds of it; nil
    /// when its data is not base64 or larger than `maximumBytes` (its note
    /// stays in the output, and nothing is sent). Throws when the file cannot
    /// be written: the output must not name bytes that are not kept.
    func keep(_ content: MediaContent) throws -> MediaReference? {
        // Base64 is 4 characters per 3 bytes: a longer text is refused before decoding.
        guard content.data.utf8.count / 4 * 3 <= Self.maximumBytes,
            let data = Data(base64Encoded: content.data, options: .ignoreUnknownCharacters), data.count <= Self.maximumBytes
        else { return nil }
        let bytes = [UInt8](data)
        let digest = SHA256.hex(bytes)
        try put(bytes, digest: digest)
        return MediaReference(type: content.type, mimeType: content.mimeType, sha256: digest, size: bytes.count)
    }

    /// The bytes `reference` names; nil when they are not here (an entry a
    /// client wrote naming bytes this session never kept, a file removed).
    func bytes(of reference: MediaReference) -> [UInt8]? {
        guard let directory else { return memory.withLock { $0[reference.sha256] } }
        guard MediaReference.isDigest(reference.sha256), case .success(let bytes) = ImageLoading.readFile(directory + "/" + reference.sha256)
        else { return nil }
        return bytes
    }

    /// Whether the bytes `reference` names are here (a file of its size),
    /// without reading them.
    func has(_ reference: MediaReference) -> Bool {
        guard let directory else { return memory.withLock { $0[reference.sha256] != nil } }
        var info = stat()
        return MediaReference.isDigest(reference.sha256) && stat(directory + "/" + reference.sha256, &info) == 0
            && (info.st_mode & S_IFMT) == S_IFREG && Int(info.st_size) == reference.size
    }

    /// Keeps `bytes` under `digest` when they are what it names (an imported
    /// session's media); false, keeping nothing, when their SHA-256 differs.
    func keep(_ bytes: [UInt8], digest: String) throws -> Bool {
        guard SHA256.hex(bytes) == digest else { return false }
        try put(bytes, digest: digest)
        return true
    }

    /// Copies what `references` name from `other` (a fork's source) that is
    /// not here yet.
    func copy(_ references: [MediaReference], from other: MediaStore) throws {
        for reference in references where bytes(of: reference) == nil {
            if let bytes = other.bytes(of: reference) { try put(bytes, digest: reference.sha256) }
        }
    }

    private func put(_ bytes: [UInt8], digest: String) throws {
        guard let directory else {
            memory.withLock { $0[digest] = bytes }
            return
        }
        let target = directory + "/" + digest
        var info = stat()
        if stat(target, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, Int(info.st_size) == bytes.count { return }
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw StoreError.posix("cannot create \(directory)")
        }
        // Written whole under a temporary name, synced, then renamed: a crash
        // leaves no half file under the digest's name.
        let temporary = directory + "/." + digest + ".tmp-\(getpid())"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StoreError.posix("cannot create \(temporary)") }
        var written = 0
        let ok = bytes.withUnsafeBytes { buffer -> Bool in
            guard let base = buffer.baseAddress else { return fsync(fd) == 0 }
            while written < buffer.count {
                let n = write(fd, base + written, buffer.count - written)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                written += n
            }
            return fsync(fd) == 0
        }
        close(fd)
        guard ok, rename(temporary, target) == 0 else {
            unlink(temporary)
            throw StoreError.posix("cannot write \(target)")
        }
        let dirFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if dirFD >= 0 {
            _ = fsync(dirFD)
            close(dirFD)
        }
    }

    /// Removes a stored session's media directory and what it holds.
    static func remove(directory: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return }
        for name in names { unlink(directory + "/" + name) }
        rmdir(directory)
    }
}
